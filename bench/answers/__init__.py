"""The decisions: what each place's answer is, from stored results alone.

Below both the adaptive sweep (``bench.adaptive``: it reads what is open and the
looks' alphas) and the reports (``reports``: they render the same decisions), above
the results and their statistics (``bench.results``). The runs as the answers read
them (``runs``), their noise (``noise``) and configurations (``configs``), the
machines they ran on (``machines``), each configuration's scaling (``scaling``), one
machine's configurations together (``basis``), the looks' alphas (``sequential``), the
decision at each place (``recommend``), what an answer is worth (``worth``), and every
place's answer without building a report (``places``). Nothing here writes a
sentence about a decision: that is the reports'.
"""

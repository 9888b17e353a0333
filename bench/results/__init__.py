"""What a run leaves behind: the typed, versioned result schema (``schema``), the
store that owns a sweep directory's layout (``store``) and summary statistics of
samples (``stats``). Importable without TensorFlow on both sides of the boundary."""

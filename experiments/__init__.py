"""What exists to study the algorithm: the demo model's training and probes, one-off benchmarks, kept records, research
variants and the results generator. Not part of the wheel; run from a clone."""

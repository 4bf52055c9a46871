"""Systems of tables: the step function, exploration (scalar and batched, rows of small ints,
partial-order reduction), the checks, concrete paths, replay. Imports spec, the kernel and the
table explorer."""

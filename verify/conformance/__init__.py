"""The conformance kit: vectors and their coverage sets, distinguishing suffixes, the adapter
harness, conform, audit, mutants. Imports spec, the table explorer and, for the reference adapter,
impl."""

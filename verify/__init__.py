"""The verifier: exhaustive exploration, named checks, counterexamples, crash injection, conformance kit."""

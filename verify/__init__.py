"""The verifier: the batched kernel, one table, systems, the Spin export, the conformance kit,
reports. Imports spec, and impl only for the conformance kit's reference adapter."""

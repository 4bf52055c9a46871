"""The batched kernel both explorers share (tables and systems): a visited set of packed codes,
expressions compiled over codes and evaluated over numpy columns. Imports only spec."""

"""The task vocabulary: the spec a user writes, the status we write back, the records the
loop carries, and their parts (pipelines, arrays, quantities, submission ids, the JSON Schema)."""

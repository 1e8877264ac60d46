"""What an operator sees and relies on: metrics (`metrics`), the resource history (`history`),
the serve lock (`lock`), the head record (`head_record`), the per-pass recorder that feeds
them (`recorder`), counts by key (`counts`) and memory given back after a start (`memory`).

Import the module you need: the CLI reads the head record without loading the metrics'
Prometheus client, so this package imports none of them."""

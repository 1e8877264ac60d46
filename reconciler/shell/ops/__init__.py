"""What an operator sees and relies on: metrics, the resource history, the serve lock, the head
record, and memory given back after a start."""

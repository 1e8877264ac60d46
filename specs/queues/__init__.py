"""The queue configuration (`_queues.yaml`): the document, its parsing, and the whole queue tree
read from the top file and each team's own."""

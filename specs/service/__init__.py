"""The task service shared by the CLI and the HTTP API: query, read and edit tasks through
the folder, with the views and errors both front ends show."""

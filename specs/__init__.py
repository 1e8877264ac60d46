"""The vocabulary of rayqueue and the tasks folder as a database; imports nothing else of ours."""

"""The old scheduler's HTTP client, its request unchanged: it works against rayqueue serve.

The working_dir is relative to the folder serve runs in: run serve from the repository root
(as for examples/tasks/working-dir.yaml), and the task ends Succeeded.
"""

import requests

if __name__ == "__main__":
    response = requests.post(
        "http://127.0.0.1:8264/add_task",
        json={
            "name": "my_job",
            "entrypoint": "python test.py",
            "runtime_env": {"working_dir": "examples/scheduler"},
            "priority": 1,
            "cpu": 1,
            "gpu": 0,
            "memory": 1,
            "timeout": 300,
        },
        timeout=60,
    )
    print(response.status_code, response.json())

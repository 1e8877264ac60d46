"""The old scheduler's trivial test job: prints, works a little, and exits 0."""

import time

if __name__ == "__main__":
    print("test job started")
    time.sleep(2)
    print("test job finished")

"""The HTTP API: a FastAPI app over the task service (`create_app`), which only reads the
folder and writes spec files; what it needs of the loop it asks through `ports`."""

from api.app import create_app
from api.errors import ApiError
from api.ports import Loop, Observability

__all__ = ["ApiError", "Loop", "Observability", "create_app"]

"""The agents' Python client is the ``graphadmin-client`` distribution (``clients/python/``, module
``graphadmin_client``); this name re-exports it for code written against ``graphadmin.agents.client``."""

from graphadmin_client import *  # noqa: F403
from graphadmin_client import __all__  # noqa: F401
from graphadmin_client.types import SEARCH_FIELDS  # noqa: F401

"""The agents' client moved to ``graphadmin.agents.client``; this name stays for agents' code written against it."""

from graphadmin.agents.client import *  # noqa: F403
from graphadmin.agents.client import __all__  # noqa: F401

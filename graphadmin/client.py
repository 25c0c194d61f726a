"""The agents' client is the graphadmin-client distribution (``graphadmin_client``, clients/python/); this name
stays for agents' code written against it."""

from graphadmin_client import *  # noqa: F403
from graphadmin_client import __all__  # noqa: F401

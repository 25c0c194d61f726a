from django.apps import AppConfig


class GraphadminConfig(AppConfig):
    name = "graphadmin"
    verbose_name = "Graph memory"

"""The permission matrix's pieces (``tests/governance/test_permission_matrix.py`` runs it):
the world it runs in, the payloads and objects each route is called with, the decisions of
the API and of the pages, and the routes walked from the URL configuration."""

"""The pieces of ``manage.py generate_usage_history``: the budget tree it builds (``tree``)
and the SQL that writes the hourly usage in bulk (``sql``)."""

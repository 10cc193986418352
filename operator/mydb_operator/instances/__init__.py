"""The operator's I/O with the PostgreSQL servers themselves: it asks each what it is, and promotes and
repoints them, over SQL as the database's superuser (asyncpg)."""

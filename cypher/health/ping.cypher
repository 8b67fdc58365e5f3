// Liveness of the database: the cheapest statement that needs a server.
RETURN 1 AS ok

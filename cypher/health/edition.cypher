// The server's edition: a Community server is always a single server (no cluster, no
// followers), so its sessions need no bookmarks (repository/database.py).
CALL dbms.components() YIELD edition
RETURN edition

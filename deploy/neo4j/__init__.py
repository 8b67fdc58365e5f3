"""The local Neo4j launcher's files (pom, Browser pack), shipped as `vaultgraph.neo4j_files`."""

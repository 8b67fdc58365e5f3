// The graph around a readable live token (beyond the interface): the tokens reachable in at most
// $depth (1-5) links, following $direction ('children': parent -> child, 'parents': the other
// way, 'both': either way), and the links among them. One statement, breadth first, unrolled
// into one block per level (Cypher cannot take the depth of a pattern as a parameter, and a
// fixed *1..5 filtered by length afterwards walks all five levels every time):
// - only readable live tokens are entered, so nothing behind an unreadable or expired token is
//   revealed, not even that a path continues;
// - a token is entered once (`seen`), so cycles (A -> B -> A) end and nothing repeats;
// - bounded: a level grows only while at most $max_nodes tokens are known, and reads at most
//   $max_links links; `truncated` says when either bound cut the answer;
// - the last block adds no token: it only picks up the links among the tokens already found.
// The direction is a predicate on an undirected expansion, so one statement serves all three.
// No row: the root is unknown, expired, unreadable or in another tenant (404).
// @visible/@live/@in_prefixes/@token: cypher/fragments/ (expanded when the catalog loads).
MATCH (root:Token {tenant_id: $tenant_id, id: $id})
WHERE @visible(root)
WITH [root] AS seen, [root] AS frontier, [] AS rels, false AS capped
// Level 1.
WITH seen, frontier, rels, capped, $depth >= 1 AND size(seen) <= $max_nodes AS grow
CALL (seen, frontier, grow) {
  UNWIND frontier AS f
  MATCH (f)-[r:PARENT_OF]-(n:Token)
  WHERE (grow OR n IN seen)
    AND ($direction = 'both' OR startNode(r) = CASE $direction WHEN 'children' THEN f ELSE n END)
    AND n.tenant_id = $tenant_id
    AND @visible(n)
  WITH r, n LIMIT $max_links + 1
  WITH collect(r) AS found, collect(DISTINCT n) AS reached
  RETURN found, [x IN reached WHERE NOT x IN seen] AS new
}
WITH seen + new AS seen, CASE WHEN grow THEN new ELSE [] END AS frontier, rels + found AS rels,
     capped OR size(found) > $max_links AS capped
// Level 2.
WITH seen, frontier, rels, capped, $depth >= 2 AND size(seen) <= $max_nodes AS grow
CALL (seen, frontier, grow) {
  UNWIND frontier AS f
  MATCH (f)-[r:PARENT_OF]-(n:Token)
  WHERE (grow OR n IN seen)
    AND ($direction = 'both' OR startNode(r) = CASE $direction WHEN 'children' THEN f ELSE n END)
    AND n.tenant_id = $tenant_id
    AND @visible(n)
  WITH r, n LIMIT $max_links + 1
  WITH collect(r) AS found, collect(DISTINCT n) AS reached
  RETURN found, [x IN reached WHERE NOT x IN seen] AS new
}
WITH seen + new AS seen, CASE WHEN grow THEN new ELSE [] END AS frontier, rels + found AS rels,
     capped OR size(found) > $max_links AS capped
// Level 3.
WITH seen, frontier, rels, capped, $depth >= 3 AND size(seen) <= $max_nodes AS grow
CALL (seen, frontier, grow) {
  UNWIND frontier AS f
  MATCH (f)-[r:PARENT_OF]-(n:Token)
  WHERE (grow OR n IN seen)
    AND ($direction = 'both' OR startNode(r) = CASE $direction WHEN 'children' THEN f ELSE n END)
    AND n.tenant_id = $tenant_id
    AND @visible(n)
  WITH r, n LIMIT $max_links + 1
  WITH collect(r) AS found, collect(DISTINCT n) AS reached
  RETURN found, [x IN reached WHERE NOT x IN seen] AS new
}
WITH seen + new AS seen, CASE WHEN grow THEN new ELSE [] END AS frontier, rels + found AS rels,
     capped OR size(found) > $max_links AS capped
// Level 4.
WITH seen, frontier, rels, capped, $depth >= 4 AND size(seen) <= $max_nodes AS grow
CALL (seen, frontier, grow) {
  UNWIND frontier AS f
  MATCH (f)-[r:PARENT_OF]-(n:Token)
  WHERE (grow OR n IN seen)
    AND ($direction = 'both' OR startNode(r) = CASE $direction WHEN 'children' THEN f ELSE n END)
    AND n.tenant_id = $tenant_id
    AND @visible(n)
  WITH r, n LIMIT $max_links + 1
  WITH collect(r) AS found, collect(DISTINCT n) AS reached
  RETURN found, [x IN reached WHERE NOT x IN seen] AS new
}
WITH seen + new AS seen, CASE WHEN grow THEN new ELSE [] END AS frontier, rels + found AS rels,
     capped OR size(found) > $max_links AS capped
// Level 5.
WITH seen, frontier, rels, capped, $depth >= 5 AND size(seen) <= $max_nodes AS grow
CALL (seen, frontier, grow) {
  UNWIND frontier AS f
  MATCH (f)-[r:PARENT_OF]-(n:Token)
  WHERE (grow OR n IN seen)
    AND ($direction = 'both' OR startNode(r) = CASE $direction WHEN 'children' THEN f ELSE n END)
    AND n.tenant_id = $tenant_id
    AND @visible(n)
  WITH r, n LIMIT $max_links + 1
  WITH collect(r) AS found, collect(DISTINCT n) AS reached
  RETURN found, [x IN reached WHERE NOT x IN seen] AS new
}
WITH seen + new AS seen, CASE WHEN grow THEN new ELSE [] END AS frontier, rels + found AS rels,
     capped OR size(found) > $max_links AS capped
// The links among the tokens found (from the last level reached).
WITH seen, frontier, rels, capped, false AS grow
CALL (seen, frontier, grow) {
  UNWIND frontier AS f
  MATCH (f)-[r:PARENT_OF]-(n:Token)
  WHERE (grow OR n IN seen)
    AND ($direction = 'both' OR startNode(r) = CASE $direction WHEN 'children' THEN f ELSE n END)
    AND n.tenant_id = $tenant_id
    AND @visible(n)
  WITH r, n LIMIT $max_links + 1
  WITH collect(r) AS found, collect(DISTINCT n) AS reached
  RETURN found, [x IN reached WHERE NOT x IN seen] AS new
}
WITH seen + new AS seen, CASE WHEN grow THEN new ELSE [] END AS frontier, rels + found AS rels,
     capped OR size(found) > $max_links AS capped
WITH seen[..$max_nodes] AS kept, rels, capped OR size(seen) > $max_nodes AS truncated
RETURN [n IN kept | @token(n)] AS tokens,
       COLLECT {
         UNWIND rels AS r
         WITH DISTINCT r
         WHERE startNode(r) IN kept AND endNode(r) IN kept
         RETURN {parent_id: startNode(r).id, child_id: endNode(r).id}
       } AS links,
       truncated

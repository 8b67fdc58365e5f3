// A page of search results (services/search.py): the one statement every query runs. Its text
// never changes with the query: the query arrives as data (search/plan.py compiles it), so
// Neo4j plans this statement once and no query shape costs planning of its own.
// $query is one map, so the plan Neo4j caches does not vary with it either (Neo4j keys its
// cache by each parameter's type, and a list's or string's size class; a map is only a map):
//   seeks   per field, the terms of that field that drive the query: `{i, value}`, or for a
//           date range `{i, low, high, low_inclusive, high_inclusive}` (`i`: the term's place
//           in the query). Every field is present (most lists are empty). The union of what
//           they find holds every match.
//   checks  per field (the same ones and `container`), the query's other terms, tested on
//           each token the seeks found.
//   seeking the places of the seek terms.
//   properties whether any check is on the token's own properties (id, type, container,
//           fingerprint, dates).
//   program the query's boolean tree in postfix: `i >= 0` pushes "term i holds", -1 ANDs the
//           two values on top of the stack, -2 ORs them, -3 negates the top one.
// $after is the cursor, {at, id} of the last token of the previous page (both null on the
// first page: a map either way, for the same reason).
// Step by step:
// 1. each seek finds the tokens that satisfy its term, from an index (one branch per field,
//    run once per term of that field: a field without terms costs nothing), and each token
//    found keeps the places of the terms that found it (`found`). A seek finds every token of
//    the tenant its term holds for, so a term holds for a token exactly when it found it.
//    The graph fields' check terms run through the same branches (one walk per term, not one
//    per candidate, and half the statement for Neo4j to plan); `seeking` (the places of the
//    seeks) tells the candidates, found by a seek, from tokens only a check reached;
// 2. a candidate is kept when it is the caller's (tenant, live, containers under $prefixes)
//    and lies after the cursor;
// 3. the other check terms are tested on the candidate, adding their places to `held`: its
//    HAS_META / HAS_INDEX entries in a subquery, its own properties as expressions;
// 4. the program is evaluated over `held`; the page is the newest $limit candidates for which
//    it holds (created_at, then id, descending).
// Graph terms walk 1 to 5 links and only through tokens the caller may see (as graph/traverse):
// nothing is found through a token it may not read; their anchor X must be visible too.
// @visible/@token: cypher/fragments/ (expanded when the catalog loads).
CALL () {
  // `id:X`: the (tenant_id, id) uniqueness constraint.
  UNWIND $query.seeks.id AS s
  MATCH (t:Token {tenant_id: $tenant_id, id: s.value}) USING INDEX SEEK t:Token(tenant_id, id)
  RETURN s.i AS i, t
  UNION ALL
  // `type:X`: the token_tenant_type_id index (a composite index serves a seek only when each
  // of its properties has a predicate: hence `id IS NOT NULL`, true of every token).
  UNWIND $query.seeks.type AS s
  MATCH (t:Token) USING INDEX SEEK t:Token(tenant_id, type, id)
  WHERE t.tenant_id = $tenant_id AND t.type = s.value AND t.id IS NOT NULL
  RETURN s.i AS i, t
  UNION ALL
  // `fingerprint:X`: the token_tenant_fingerprint index.
  UNWIND $query.seeks.fingerprint AS s
  MATCH (t:Token) USING INDEX SEEK t:Token(tenant_id, fingerprint)
  WHERE t.tenant_id = $tenant_id AND t.fingerprint = s.value
  RETURN s.i AS i, t
  UNION ALL
  // `metadata.<key>:X`: the HAS_META self-loops by (tenant_id, kv) in the token_meta
  // relationship index; the value is the lower-cased key U+001F value. `token_id IS NOT NULL`
  // (always true) lets the planner seek the three-property index.
  UNWIND $query.seeks.metadata AS s
  MATCH (t:Token)-[m:HAS_META]->(t) USING INDEX SEEK m:HAS_META(tenant_id, kv, token_id)
  WHERE m.tenant_id = $tenant_id AND m.kv = s.value AND m.token_id IS NOT NULL
  RETURN s.i AS i, t
  UNION ALL
  // `data:X`: the blind index. Each value a token's search index expressions produce is stored
  // only as a keyed HMAC on a HAS_INDEX self-loop {tenant_id, digest, token_id}, found by
  // (tenant_id, digest) in the token_search_index relationship index; the value is the HMAC.
  UNWIND $query.seeks.data AS s
  MATCH (t:Token)-[x:HAS_INDEX]->(t) USING INDEX SEEK x:HAS_INDEX(tenant_id, digest, token_id)
  WHERE x.tenant_id = $tenant_id AND x.digest = s.value AND x.token_id IS NOT NULL
  RETURN s.i AS i, t
  UNION ALL
  // `created_at:[low TO high]`: a range seek in token_tenant_created_at; exclusive ends are
  // checked after the seek.
  UNWIND $query.seeks.created_at AS s
  MATCH (t:Token) USING INDEX SEEK t:Token(tenant_id, created_at)
  WHERE t.tenant_id = $tenant_id AND t.created_at >= s.low AND t.created_at <= s.high
    AND (s.low_inclusive OR t.created_at > s.low) AND (s.high_inclusive OR t.created_at < s.high)
  RETURN s.i AS i, t
  UNION ALL
  // `expires_at:[low TO high]`: the same in token_tenant_expires_at.
  UNWIND $query.seeks.expires_at AS s
  MATCH (t:Token) USING INDEX SEEK t:Token(tenant_id, expires_at)
  WHERE t.tenant_id = $tenant_id AND t.expires_at >= s.low AND t.expires_at <= s.high
    AND (s.low_inclusive OR t.expires_at > s.low) AND (s.high_inclusive OR t.expires_at < s.high)
  RETURN s.i AS i, t
  UNION ALL
  // `parent:X` (tokens whose parent is X): X by its id, then its child links.
  UNWIND $query.seeks.parent + $query.checks.parent AS s
  MATCH (p:Token {tenant_id: $tenant_id, id: s.value})-[:PARENT_OF]->(t:Token)
    USING INDEX SEEK p:Token(tenant_id, id)
  WHERE @visible(p)
  RETURN s.i AS i, t
  UNION ALL
  // `child:X` (tokens with child X): X by its id, then its parent links.
  UNWIND $query.seeks.child + $query.checks.child AS s
  MATCH (t:Token)-[:PARENT_OF]->(k:Token {tenant_id: $tenant_id, id: s.value})
    USING INDEX SEEK k:Token(tenant_id, id)
  WHERE @visible(k)
  RETURN s.i AS i, t
  UNION ALL
  // `ancestor:X` (tokens with X among their ancestors: X's descendants, 1 to 5 links down).
  UNWIND $query.seeks.ancestor + $query.checks.ancestor AS s
  MATCH (a:Token {tenant_id: $tenant_id, id: s.value}) USING INDEX SEEK a:Token(tenant_id, id)
  WHERE @visible(a)
  MATCH (a) ((:Token)-[:PARENT_OF]->(n:Token WHERE n.tenant_id = $tenant_id
      AND @visible(n))){1,5} (t)
  RETURN DISTINCT s.i AS i, t
  UNION ALL
  // `descendant:X` (tokens with X among their descendants: X's ancestors, 1 to 5 links up).
  UNWIND $query.seeks.descendant + $query.checks.descendant AS s
  MATCH (d:Token {tenant_id: $tenant_id, id: s.value}) USING INDEX SEEK d:Token(tenant_id, id)
  WHERE @visible(d)
  MATCH (t) ((n:Token WHERE n.tenant_id = $tenant_id
      AND @visible(n))
      -[:PARENT_OF]->(:Token)){1,5} (d)
  RETURN DISTINCT s.i AS i, t
}
WITH t, collect(i) AS found
WHERE any(i IN found WHERE i IN $query.seeking)
  AND t.tenant_id = $tenant_id
  AND @visible(t)
  AND ($after.id IS NULL OR t.created_at < datetime($after.at)
       OR (t.created_at = datetime($after.at) AND t.id < $after.id))
CALL (t) {
  CALL (t) {
    // The candidate's own HAS_META / HAS_INDEX self-loops (see the seeks above).
    UNWIND $query.checks.metadata AS c
    WITH c WHERE EXISTS { MATCH (t)-[m:HAS_META]->(t) WHERE m.kv = c.value }
    RETURN c.i AS i
    UNION ALL
    UNWIND $query.checks.data AS c
    WITH c WHERE EXISTS { MATCH (t)-[x:HAS_INDEX]->(t) WHERE x.digest = c.value }
    RETURN c.i AS i
  }
  RETURN collect(i) AS checked
}
// The checks on the token's own properties need no subquery (and read nothing when there are
// none: `properties` is false).
WITH t, found + checked + CASE WHEN $query.properties THEN
    [c IN $query.checks.id WHERE t.id = c.value | c.i]
    + [c IN $query.checks.type WHERE t.type = c.value | c.i]
    // `container:/path/`: one of the token's containers lies under the path (a prefix match,
    // as access rules match containers). Only ever a check: no index serves a list property.
    + [c IN $query.checks.container WHERE any(x IN t.containers WHERE x STARTS WITH c.value)
       | c.i]
    + [c IN $query.checks.fingerprint WHERE t.fingerprint = c.value | c.i]
    + [c IN $query.checks.created_at WHERE t.created_at >= c.low AND t.created_at <= c.high
         AND (c.low_inclusive OR t.created_at > c.low)
         AND (c.high_inclusive OR t.created_at < c.high) | c.i]
    + [c IN $query.checks.expires_at WHERE t.expires_at >= c.low AND t.expires_at <= c.high
         AND (c.low_inclusive OR t.expires_at > c.low)
         AND (c.high_inclusive OR t.expires_at < c.high) | c.i]
  ELSE [] END AS held
WHERE reduce(stack = [], op IN $query.program |
        CASE
          WHEN op >= 0 THEN stack + [(op IN held)]
          WHEN op = -3 THEN stack[..-1] + [NOT stack[-1]]
          WHEN op = -1 THEN stack[..-2] + [stack[-2] AND stack[-1]]
          ELSE stack[..-2] + [stack[-2] OR stack[-1]]
        END)[0]
WITH t ORDER BY t.created_at DESC, t.id DESC
LIMIT $limit
RETURN collect(@token(t)) AS tokens

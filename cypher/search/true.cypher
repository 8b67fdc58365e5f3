// The check of search/frame when the seeks alone answer the query.
true

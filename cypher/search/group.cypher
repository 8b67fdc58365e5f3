// Brackets one check of search/frame ({{inner}}), so AND, OR and NOT keep the query's grouping.
({{inner}})

// Joins two seeks of search/frame: the candidates of either (duplicates dropped).
UNION

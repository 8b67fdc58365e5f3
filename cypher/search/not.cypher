// Precedes a check of search/frame: it does not hold.
NOT

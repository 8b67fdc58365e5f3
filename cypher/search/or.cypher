// Joins two checks of search/frame: either holds.
OR

// Joins two checks of search/frame: both hold.
AND

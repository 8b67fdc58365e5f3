// Check for `created_at:[low TO high]` on a candidate `t` of search/frame (false when unset).
coalesce(t.created_at >= $low AND t.created_at <= $high
         AND ($low_inclusive OR t.created_at > $low) AND ($high_inclusive OR t.created_at < $high), false)

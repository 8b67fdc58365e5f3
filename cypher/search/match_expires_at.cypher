// Check for `expires_at:[low TO high]` on a candidate `t` of search/frame (false when unset).
coalesce(t.expires_at >= $low AND t.expires_at <= $high
         AND ($low_inclusive OR t.expires_at > $low) AND ($high_inclusive OR t.expires_at < $high), false)

//! "Did you mean ...?": the one rule for naming the closest of a set of
//! names to a word the user mistyped (a command, a var, a benchmark).

/// The candidate closest to `word` when one is close: at most two edits
/// (transpositions count as one) and at most half the candidate's length
/// (so `rn` finds `run` but not `man`), or, for a word of three letters or
/// more, a candidate it begins. Ties go to the first name in order.
pub fn closest<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    candidates
        .into_iter()
        .map(|c| (strsim::damerau_levenshtein(word, c), c))
        .filter(|(d, c)| {
            *d <= 2.min((c.len() / 2).max(1)) || (word.len() >= 3 && c.starts_with(word))
        })
        .min()
        .map(|(_, c)| c)
}

/// The candidate nearest to `word` by Levenshtein distance, when that
/// distance is at most `limit` (ties go to the first in order). For names
/// read from files, where a near miss is a typo, not a prefix.
pub fn nearest<'a>(
    word: &str,
    candidates: impl IntoIterator<Item = &'a str>,
    limit: usize,
) -> Option<&'a str> {
    candidates
        .into_iter()
        .map(|c| (strsim::levenshtein(word, c), c))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

#[cfg(test)]
mod tests {
    use super::{closest, nearest};

    #[test]
    fn near_misses_and_prefixes() {
        let commands = ["list", "info", "run", "man", "serve", "cachebench"];
        assert_eq!(closest("rn", commands), Some("run"));
        assert_eq!(closest("cachbench", commands), Some("cachebench"));
        assert_eq!(closest("ser", commands), Some("serve"));
        assert_eq!(closest("frobnicate", commands), None);
        assert_eq!(closest("sed", ["seed", "workers"]), Some("seed"));
    }

    #[test]
    fn nearest_keeps_to_its_limit_and_the_first_of_equals() {
        let keys = ["load", "loops", "lode"];
        assert_eq!(nearest("lod", keys, 2), Some("load"));
        assert_eq!(nearest("speedy", keys, 2), None);
        assert_eq!(nearest("xx", ["ab", "cd"], 2), Some("ab"));
        assert_eq!(nearest("xx", ["ab", "cd"], 1), None);
    }
}

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

#[cfg(test)]
mod tests {
    use super::closest;

    #[test]
    fn near_misses_and_prefixes() {
        let commands = ["list", "info", "run", "man", "serve", "cachebench"];
        assert_eq!(closest("rn", commands), Some("run"));
        assert_eq!(closest("cachbench", commands), Some("cachebench"));
        assert_eq!(closest("ser", commands), Some("serve"));
        assert_eq!(closest("frobnicate", commands), None);
        assert_eq!(closest("sed", ["seed", "workers"]), Some("seed"));
    }
}

//! The built-in 5x7 bitmap font.
//!
//! Every glyph is seven rows of five pixels, top row first; in each row bit 4
//! is the leftmost pixel and bit 0 the rightmost. A glyph occupies a cell of
//! [`CELL_W`] x [`CELL_H`] pixels (one blank column to its right, one blank
//! row below), so text is `6 * n - 1` pixels wide at scale 1. The letters
//! g, p, q and y are drawn [`DESCENT`] rows lower, below the baseline. Characters
//! outside printable ASCII are drawn as `?`, except the micro sign (µ), which
//! latency units need.

/// Glyph width in pixels at scale 1.
pub const GLYPH_W: u32 = 5;
/// Glyph height in pixels at scale 1.
pub const GLYPH_H: u32 = 7;
/// Horizontal advance per character at scale 1.
pub const CELL_W: u32 = GLYPH_W + 1;
/// Line height at scale 1.
pub const CELL_H: u32 = GLYPH_H + 1;

/// How far below the other glyphs the descending letters are drawn.
pub const DESCENT: u32 = 2;

/// The first character in [`GLYPHS`].
const FIRST: u32 = 0x20;

/// Printable ASCII, 0x20 (space) to 0x7E (`~`). The rows of g, p, q and y
/// start at the x-height (see [`descends`]).
#[rustfmt::skip]
const GLYPHS: [[u8; 7]; 95] = [
    [0b00000, 0b00000, 0b00000, 0b00000, 0b00000, 0b00000, 0b00000], // ' '
    [0b00100, 0b00100, 0b00100, 0b00100, 0b00100, 0b00000, 0b00100], // '!'
    [0b01010, 0b01010, 0b01010, 0b00000, 0b00000, 0b00000, 0b00000], // '"'
    [0b01010, 0b01010, 0b11111, 0b01010, 0b11111, 0b01010, 0b01010], // '#'
    [0b00100, 0b01111, 0b10100, 0b01110, 0b00101, 0b11110, 0b00100], // '$'
    [0b11000, 0b11001, 0b00010, 0b00100, 0b01000, 0b10011, 0b00011], // '%'
    [0b01100, 0b10010, 0b10100, 0b01000, 0b10101, 0b10010, 0b01101], // '&'
    [0b00100, 0b00100, 0b01000, 0b00000, 0b00000, 0b00000, 0b00000], // '\''
    [0b00010, 0b00100, 0b01000, 0b01000, 0b01000, 0b00100, 0b00010], // '('
    [0b01000, 0b00100, 0b00010, 0b00010, 0b00010, 0b00100, 0b01000], // ')'
    [0b00000, 0b00100, 0b10101, 0b01110, 0b10101, 0b00100, 0b00000], // '*'
    [0b00000, 0b00100, 0b00100, 0b11111, 0b00100, 0b00100, 0b00000], // '+'
    [0b00000, 0b00000, 0b00000, 0b00000, 0b01100, 0b00100, 0b01000], // ','
    [0b00000, 0b00000, 0b00000, 0b11111, 0b00000, 0b00000, 0b00000], // '-'
    [0b00000, 0b00000, 0b00000, 0b00000, 0b00000, 0b01100, 0b01100], // '.'
    [0b00000, 0b00001, 0b00010, 0b00100, 0b01000, 0b10000, 0b00000], // '/'
    [0b01110, 0b10001, 0b10011, 0b10101, 0b11001, 0b10001, 0b01110], // '0'
    [0b00100, 0b01100, 0b00100, 0b00100, 0b00100, 0b00100, 0b01110], // '1'
    [0b01110, 0b10001, 0b00001, 0b00010, 0b00100, 0b01000, 0b11111], // '2'
    [0b11111, 0b00010, 0b00100, 0b00010, 0b00001, 0b10001, 0b01110], // '3'
    [0b00010, 0b00110, 0b01010, 0b10010, 0b11111, 0b00010, 0b00010], // '4'
    [0b11111, 0b10000, 0b11110, 0b00001, 0b00001, 0b10001, 0b01110], // '5'
    [0b00110, 0b01000, 0b10000, 0b11110, 0b10001, 0b10001, 0b01110], // '6'
    [0b11111, 0b00001, 0b00010, 0b00100, 0b01000, 0b01000, 0b01000], // '7'
    [0b01110, 0b10001, 0b10001, 0b01110, 0b10001, 0b10001, 0b01110], // '8'
    [0b01110, 0b10001, 0b10001, 0b01111, 0b00001, 0b00010, 0b01100], // '9'
    [0b00000, 0b01100, 0b01100, 0b00000, 0b01100, 0b01100, 0b00000], // ':'
    [0b00000, 0b01100, 0b01100, 0b00000, 0b01100, 0b00100, 0b01000], // ';'
    [0b00010, 0b00100, 0b01000, 0b10000, 0b01000, 0b00100, 0b00010], // '<'
    [0b00000, 0b00000, 0b11111, 0b00000, 0b11111, 0b00000, 0b00000], // '='
    [0b01000, 0b00100, 0b00010, 0b00001, 0b00010, 0b00100, 0b01000], // '>'
    [0b01110, 0b10001, 0b00001, 0b00010, 0b00100, 0b00000, 0b00100], // '?'
    [0b01110, 0b10001, 0b00001, 0b01101, 0b10101, 0b10101, 0b01110], // '@'
    [0b01110, 0b10001, 0b10001, 0b11111, 0b10001, 0b10001, 0b10001], // 'A'
    [0b11110, 0b10001, 0b10001, 0b11110, 0b10001, 0b10001, 0b11110], // 'B'
    [0b01110, 0b10001, 0b10000, 0b10000, 0b10000, 0b10001, 0b01110], // 'C'
    [0b11100, 0b10010, 0b10001, 0b10001, 0b10001, 0b10010, 0b11100], // 'D'
    [0b11111, 0b10000, 0b10000, 0b11110, 0b10000, 0b10000, 0b11111], // 'E'
    [0b11111, 0b10000, 0b10000, 0b11110, 0b10000, 0b10000, 0b10000], // 'F'
    [0b01110, 0b10001, 0b10000, 0b10111, 0b10001, 0b10001, 0b01111], // 'G'
    [0b10001, 0b10001, 0b10001, 0b11111, 0b10001, 0b10001, 0b10001], // 'H'
    [0b01110, 0b00100, 0b00100, 0b00100, 0b00100, 0b00100, 0b01110], // 'I'
    [0b00111, 0b00010, 0b00010, 0b00010, 0b00010, 0b10010, 0b01100], // 'J'
    [0b10001, 0b10010, 0b10100, 0b11000, 0b10100, 0b10010, 0b10001], // 'K'
    [0b10000, 0b10000, 0b10000, 0b10000, 0b10000, 0b10000, 0b11111], // 'L'
    [0b10001, 0b11011, 0b10101, 0b10101, 0b10001, 0b10001, 0b10001], // 'M'
    [0b10001, 0b10001, 0b11001, 0b10101, 0b10011, 0b10001, 0b10001], // 'N'
    [0b01110, 0b10001, 0b10001, 0b10001, 0b10001, 0b10001, 0b01110], // 'O'
    [0b11110, 0b10001, 0b10001, 0b11110, 0b10000, 0b10000, 0b10000], // 'P'
    [0b01110, 0b10001, 0b10001, 0b10001, 0b10101, 0b10010, 0b01101], // 'Q'
    [0b11110, 0b10001, 0b10001, 0b11110, 0b10100, 0b10010, 0b10001], // 'R'
    [0b01111, 0b10000, 0b10000, 0b01110, 0b00001, 0b00001, 0b11110], // 'S'
    [0b11111, 0b00100, 0b00100, 0b00100, 0b00100, 0b00100, 0b00100], // 'T'
    [0b10001, 0b10001, 0b10001, 0b10001, 0b10001, 0b10001, 0b01110], // 'U'
    [0b10001, 0b10001, 0b10001, 0b10001, 0b10001, 0b01010, 0b00100], // 'V'
    [0b10001, 0b10001, 0b10001, 0b10101, 0b10101, 0b10101, 0b01010], // 'W'
    [0b10001, 0b10001, 0b01010, 0b00100, 0b01010, 0b10001, 0b10001], // 'X'
    [0b10001, 0b10001, 0b10001, 0b01010, 0b00100, 0b00100, 0b00100], // 'Y'
    [0b11111, 0b00001, 0b00010, 0b00100, 0b01000, 0b10000, 0b11111], // 'Z'
    [0b01110, 0b01000, 0b01000, 0b01000, 0b01000, 0b01000, 0b01110], // '['
    [0b00000, 0b10000, 0b01000, 0b00100, 0b00010, 0b00001, 0b00000], // '\\'
    [0b01110, 0b00010, 0b00010, 0b00010, 0b00010, 0b00010, 0b01110], // ']'
    [0b00100, 0b01010, 0b10001, 0b00000, 0b00000, 0b00000, 0b00000], // '^'
    [0b00000, 0b00000, 0b00000, 0b00000, 0b00000, 0b00000, 0b11111], // '_'
    [0b01000, 0b00100, 0b00010, 0b00000, 0b00000, 0b00000, 0b00000], // '`'
    [0b00000, 0b00000, 0b01110, 0b00001, 0b01111, 0b10001, 0b01111], // 'a'
    [0b10000, 0b10000, 0b10110, 0b11001, 0b10001, 0b10001, 0b11110], // 'b'
    [0b00000, 0b00000, 0b01110, 0b10000, 0b10000, 0b10001, 0b01110], // 'c'
    [0b00001, 0b00001, 0b01101, 0b10011, 0b10001, 0b10001, 0b01111], // 'd'
    [0b00000, 0b00000, 0b01110, 0b10001, 0b11111, 0b10000, 0b01110], // 'e'
    [0b00110, 0b01001, 0b01000, 0b11100, 0b01000, 0b01000, 0b01000], // 'f'
    [0b01111, 0b10001, 0b10001, 0b10011, 0b01101, 0b00001, 0b01110], // 'g'
    [0b10000, 0b10000, 0b10110, 0b11001, 0b10001, 0b10001, 0b10001], // 'h'
    [0b00100, 0b00000, 0b01100, 0b00100, 0b00100, 0b00100, 0b01110], // 'i'
    [0b00010, 0b00000, 0b00110, 0b00010, 0b00010, 0b10010, 0b01100], // 'j'
    [0b10000, 0b10000, 0b10010, 0b10100, 0b11000, 0b10100, 0b10010], // 'k'
    [0b01100, 0b00100, 0b00100, 0b00100, 0b00100, 0b00100, 0b01110], // 'l'
    [0b00000, 0b00000, 0b11010, 0b10101, 0b10101, 0b10001, 0b10001], // 'm'
    [0b00000, 0b00000, 0b10110, 0b11001, 0b10001, 0b10001, 0b10001], // 'n'
    [0b00000, 0b00000, 0b01110, 0b10001, 0b10001, 0b10001, 0b01110], // 'o'
    [0b11110, 0b10001, 0b10001, 0b10001, 0b11110, 0b10000, 0b10000], // 'p'
    [0b01111, 0b10001, 0b10001, 0b10001, 0b01111, 0b00001, 0b00001], // 'q'
    [0b00000, 0b00000, 0b10110, 0b11001, 0b10000, 0b10000, 0b10000], // 'r'
    [0b00000, 0b00000, 0b01110, 0b10000, 0b01110, 0b00001, 0b11110], // 's'
    [0b01000, 0b01000, 0b11100, 0b01000, 0b01000, 0b01001, 0b00110], // 't'
    [0b00000, 0b00000, 0b10001, 0b10001, 0b10001, 0b10011, 0b01101], // 'u'
    [0b00000, 0b00000, 0b10001, 0b10001, 0b10001, 0b01010, 0b00100], // 'v'
    [0b00000, 0b00000, 0b10001, 0b10001, 0b10101, 0b10101, 0b01010], // 'w'
    [0b00000, 0b00000, 0b10001, 0b01010, 0b00100, 0b01010, 0b10001], // 'x'
    [0b10001, 0b10001, 0b10001, 0b10011, 0b01101, 0b00001, 0b01110], // 'y'
    [0b00000, 0b00000, 0b11111, 0b00010, 0b00100, 0b01000, 0b11111], // 'z'
    [0b00010, 0b00100, 0b00100, 0b01000, 0b00100, 0b00100, 0b00010], // '{'
    [0b00100, 0b00100, 0b00100, 0b00100, 0b00100, 0b00100, 0b00100], // '|'
    [0b01000, 0b00100, 0b00100, 0b00010, 0b00100, 0b00100, 0b01000], // '}'
    [0b00000, 0b00000, 0b01000, 0b10101, 0b00010, 0b00000, 0b00000], // '~'
];

/// The micro sign (U+00B5, also used for U+03BC).
#[rustfmt::skip]
const MICRO: [u8; 7] = [0b00000, 0b00000, 0b10001, 0b10001, 0b10011, 0b11101, 0b10000];

/// The bitmap for `c`.
pub fn glyph(c: char) -> &'static [u8; 7] {
    let code = c as u32;
    if (FIRST..FIRST + GLYPHS.len() as u32).contains(&code) {
        &GLYPHS[(code - FIRST) as usize]
    } else if c == '\u{b5}' || c == '\u{3bc}' {
        &MICRO
    } else {
        &GLYPHS[('?' as u32 - FIRST) as usize]
    }
}

/// Whether `c` is drawn [`DESCENT`] rows lower than the other glyphs.
pub fn descends(c: char) -> bool {
    matches!(c, 'g' | 'p' | 'q' | 'y')
}

/// Width in pixels of `text` drawn at `scale` (no trailing gap).
pub fn text_width(text: &str, scale: u32) -> u32 {
    let n = text.chars().count() as u32;
    n.saturating_mul(CELL_W)
        .saturating_sub(1)
        .saturating_mul(scale)
}

/// Height in pixels of one line of text at `scale`, from the top of the
/// capitals to the baseline (descenders go [`DESCENT`] rows further).
pub fn text_height(scale: u32) -> u32 {
    GLYPH_H * scale
}

/// Cut `text` so that it fits in `max_width` pixels at `scale`, replacing the
/// tail by `..` when something had to go.
pub fn fit(text: &str, max_width: u32, scale: u32) -> String {
    if text_width(text, scale) <= max_width {
        return text.to_string();
    }
    let max_chars = ((max_width / scale.max(1) + 1) / CELL_W) as usize;
    if max_chars <= 2 {
        return ".".repeat(max_chars);
    }
    let mut out: String = text.chars().take(max_chars - 2).collect();
    out.push_str("..");
    out
}

/// Cut `text` so that it fits in `max_width` pixels at `scale`, replacing
/// its middle by `..` when something had to go: names that differ only at
/// the end stay apart.
pub fn fit_middle(text: &str, max_width: u32, scale: u32) -> String {
    if text_width(text, scale) <= max_width {
        return text.to_string();
    }
    let max_chars = ((max_width / scale.max(1) + 1) / CELL_W) as usize;
    if max_chars <= 4 {
        return fit(text, max_width, scale);
    }
    let chars: Vec<char> = text.chars().collect();
    let keep = max_chars - 2;
    let tail = keep / 2;
    let head = keep - tail;
    let mut out: String = chars[..head].iter().collect();
    out.push_str("..");
    out.extend(&chars[chars.len() - tail..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn printable_glyphs_are_drawn_and_fit_five_columns() {
        for code in 0x21u8..=0x7E {
            let g = glyph(code as char);
            assert!(g.iter().any(|&row| row != 0), "{:?} is blank", code as char);
            assert!(g.iter().all(|&row| row < 32), "{:?} too wide", code as char);
        }
        assert!(glyph(' ').iter().all(|&row| row == 0));
    }

    #[test]
    fn printable_glyphs_are_distinct() {
        for a in 0x20u8..=0x7E {
            for b in a + 1..=0x7E {
                assert_ne!(
                    glyph(a as char),
                    glyph(b as char),
                    "{:?} and {:?}",
                    a as char,
                    b as char
                );
            }
        }
    }

    #[test]
    fn unknown_characters_fall_back() {
        assert_eq!(glyph('\u{2603}'), glyph('?'));
        assert_eq!(glyph('\n'), glyph('?'));
        assert_eq!(glyph('µ'), &MICRO);
    }

    #[test]
    fn widths_and_fitting() {
        assert_eq!(text_width("", 1), 0);
        assert_eq!(text_width("a", 1), 5);
        assert_eq!(text_width("ab", 1), 11);
        assert_eq!(text_width("ab", 2), 22);
        assert_eq!(fit("hello", 100, 1), "hello");
        let cut = fit("a rather long legend name", 60, 1);
        assert!(cut.ends_with(".."));
        assert!(text_width(&cut, 1) <= 60, "{cut}");
        assert!(text_width(&fit("abcdef", 3, 1), 1) <= 3);
        assert_eq!(fit("abcdef", 0, 1), "");
    }
}

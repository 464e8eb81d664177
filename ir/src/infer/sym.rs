//! Symbolic dimension arithmetic.
//!
//! A derived dim (`seq+1`, `2*batch`, `batch*seq`, `(h+1)//2`) is stored as a
//! [`Dim::Sym`] whose string is the canonical print of a small polynomial with
//! integer coefficients over atoms. An atom is a symbol name or a floor
//! division of a polynomial by a positive constant. Canonical form: terms by
//! descending degree, then by text; a term is `coef*a*b` with atoms sorted; the
//! constant term comes last. The same expression therefore always prints the
//! same way, so equal strings mean equal dims.
//!
//! Strings that do not parse (sympy's `Max(1, s0)`, names with odd
//! characters) are kept as opaque symbols: they compare by text and never
//! simplify, which is always sound.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use crate::shape::Dim;

/// Most terms an expression may have before it is given up as unknown.
const MAX_TERMS: usize = 16;

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Atom {
    Sym(String),
    /// `floor(expr / d)` with `d > 1`.
    FloorDiv(Box<Expr>, i64),
}

/// A polynomial: monomial (sorted atoms, empty for the constant) → coefficient.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Expr {
    terms: BTreeMap<Vec<Atom>, i64>,
}

impl Expr {
    pub fn constant(c: i64) -> Expr {
        let mut terms = BTreeMap::new();
        if c != 0 {
            terms.insert(Vec::new(), c);
        }
        Expr { terms }
    }

    pub fn symbol(name: &str) -> Expr {
        Expr::atom(Atom::Sym(name.to_string()))
    }

    fn atom(a: Atom) -> Expr {
        let mut terms = BTreeMap::new();
        terms.insert(vec![a], 1);
        Expr { terms }
    }

    /// The value when the expression has no atoms.
    pub fn as_constant(&self) -> Option<i64> {
        match self.terms.len() {
            0 => Some(0),
            1 => self.terms.get(&Vec::new()).copied(),
            _ => None,
        }
    }

    fn too_big(&self) -> bool {
        self.terms.len() > MAX_TERMS
    }

    pub fn add(&self, other: &Expr) -> Option<Expr> {
        let mut out = self.clone();
        for (m, c) in &other.terms {
            let e = out.terms.entry(m.clone()).or_insert(0);
            *e = e.checked_add(*c)?;
            if *e == 0 {
                out.terms.remove(m);
            }
        }
        (!out.too_big()).then_some(out)
    }

    pub fn neg(&self) -> Option<Expr> {
        let mut out = self.clone();
        for c in out.terms.values_mut() {
            *c = c.checked_neg()?;
        }
        Some(out)
    }

    pub fn sub(&self, other: &Expr) -> Option<Expr> {
        self.add(&other.neg()?)
    }

    pub fn mul(&self, other: &Expr) -> Option<Expr> {
        let mut out = Expr::default();
        for (m1, c1) in &self.terms {
            for (m2, c2) in &other.terms {
                let mut m: Vec<Atom> = m1.iter().chain(m2.iter()).cloned().collect();
                m.sort();
                let c = c1.checked_mul(*c2)?;
                let e = out.terms.entry(m.clone()).or_insert(0);
                *e = e.checked_add(c)?;
                if *e == 0 {
                    out.terms.remove(&m);
                }
            }
            if out.too_big() {
                return None;
            }
        }
        Some(out)
    }

    /// Exact division: `Some` only when every term divides (by a constant or a
    /// monomial divisor).
    pub fn div_exact(&self, other: &Expr) -> Option<Expr> {
        if other.terms.len() != 1 {
            return if self == other && !self.terms.is_empty() {
                Some(Expr::constant(1))
            } else {
                None
            };
        }
        let (dm, dc) = other.terms.iter().next()?;
        if *dc == 0 {
            return None;
        }
        let mut out = Expr::default();
        for (m, c) in &self.terms {
            if c % dc != 0 {
                return None;
            }
            let mut rest = m.clone();
            for a in dm {
                let i = rest.iter().position(|x| x == a)?;
                rest.remove(i);
            }
            out.terms.insert(rest, c / dc);
        }
        Some(out)
    }

    /// `floor(self / d)` for a constant `d > 0`.
    pub fn floor_div(&self, d: i64) -> Option<Expr> {
        if d <= 0 {
            return None;
        }
        if d == 1 {
            return Some(self.clone());
        }
        if let Some(c) = self.as_constant() {
            return Some(Expr::constant(c.div_euclid(d)));
        }
        if let Some(q) = self.div_exact(&Expr::constant(d)) {
            return Some(q);
        }
        // Pull the multiples of d out: floor((d*a + r)/d) = a + floor(r/d).
        let mut whole = Expr::default();
        let mut rest = Expr::default();
        for (m, c) in &self.terms {
            let q = c.div_euclid(d);
            let r = c.rem_euclid(d);
            if q != 0 {
                whole.terms.insert(m.clone(), q);
            }
            if r != 0 {
                rest.terms.insert(m.clone(), r);
            }
        }
        let tail = match rest.as_constant() {
            Some(c) => Expr::constant(c.div_euclid(d)),
            None => Expr::atom(Atom::FloorDiv(Box::new(rest), d)),
        };
        whole.add(&tail)
    }

    /// `ceil(self / d)` for a constant `d > 0`.
    pub fn ceil_div(&self, d: i64) -> Option<Expr> {
        self.add(&Expr::constant(d - 1))?.floor_div(d)
    }

    /// Replaces bound symbols by their values and simplifies.
    pub fn substitute(&self, bindings: &BTreeMap<String, i64>) -> Option<Expr> {
        let mut out = Expr::default();
        for (m, c) in &self.terms {
            let mut term = Expr::constant(*c);
            for a in m {
                let v = match a {
                    Atom::Sym(s) => match bindings.get(s) {
                        Some(&v) => Expr::constant(v),
                        None => Expr::atom(a.clone()),
                    },
                    Atom::FloorDiv(e, d) => e.substitute(bindings)?.floor_div(*d)?,
                };
                term = term.mul(&v)?;
            }
            out = out.add(&term)?;
        }
        Some(out)
    }

    /// The expression as `sum(coef * symbol) + constant` when every term
    /// is a constant or one symbol (no product, no floor division).
    pub fn linear(&self) -> Option<(BTreeMap<String, i64>, i64)> {
        let mut coefs = BTreeMap::new();
        let mut constant = 0;
        for (m, c) in &self.terms {
            match m.as_slice() {
                [] => constant = *c,
                [Atom::Sym(s)] => {
                    coefs.insert(s.clone(), *c);
                }
                _ => return None,
            }
        }
        Some((coefs, constant))
    }

    /// Symbol names the expression mentions.
    pub fn symbols(&self, out: &mut BTreeSet<String>) {
        for m in self.terms.keys() {
            for a in m {
                match a {
                    Atom::Sym(s) => {
                        out.insert(s.clone());
                    }
                    Atom::FloorDiv(e, _) => e.symbols(out),
                }
            }
        }
    }

    /// Parses a dim_param. Never fails: text that is not an expression is one
    /// opaque symbol.
    pub fn parse(text: &str) -> Expr {
        let mut p = Parser {
            s: text.as_bytes(),
            i: 0,
        };
        match p.expr() {
            Some(e) if p.at_end() => e,
            _ => Expr::symbol(text.trim()),
        }
    }

    pub fn to_dim(&self) -> Dim {
        match self.as_constant() {
            Some(c) => Dim::Known(c),
            None => Dim::Sym(self.to_string()),
        }
    }
}

fn atom_text(a: &Atom) -> String {
    match a {
        Atom::Sym(s) => s.clone(),
        Atom::FloorDiv(e, d) => {
            let inner = e.to_string();
            let simple = e.terms.len() == 1 && e.terms.iter().all(|(m, c)| *c == 1 && m.len() == 1);
            if simple {
                format!("{inner}//{d}")
            } else {
                format!("({inner})//{d}")
            }
        }
    }
}

/// The atoms of a monomial joined by `*`. In a product (more than one
/// atom, or a coefficient), a floor division is put in parentheses: `*`
/// and `//` read left to right, so `2*(h+1)//2` parses back as
/// `(2*(h+1))//2 = h+1`, not `2*((h+1)//2)`. It did: a tf2onnx U-Net's
/// upsampled height, printed so, came back one too large on odd sizes,
/// and a dilated convolution's space-to-batch padding folded to a constant
/// that held at no input size (LEADER: exit 4 on every size).
fn monomial_text(m: &[Atom], in_product: bool) -> String {
    m.iter()
        .map(|a| match a {
            Atom::FloorDiv(..) if in_product => format!("({})", atom_text(a)),
            _ => atom_text(a),
        })
        .collect::<Vec<_>>()
        .join("*")
}

impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.terms.is_empty() {
            return f.write_str("0");
        }
        let mut terms: Vec<(usize, String, i64)> = self
            .terms
            .iter()
            .map(|(m, c)| (m.len(), monomial_text(m, m.len() > 1 || c.abs() != 1), *c))
            .collect();
        // Descending degree, then text; the constant (degree 0) last.
        terms.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
        for (i, (deg, text, c)) in terms.iter().enumerate() {
            let (neg, mag) = if *c < 0 {
                (true, c.unsigned_abs())
            } else {
                (false, *c as u64)
            };
            if i == 0 {
                if neg {
                    f.write_str("-")?;
                }
            } else {
                f.write_str(if neg { "-" } else { "+" })?;
            }
            if *deg == 0 {
                write!(f, "{mag}")?;
            } else if mag == 1 {
                f.write_str(text)?;
            } else {
                write!(f, "{mag}*{text}")?;
            }
        }
        Ok(())
    }
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn skip_ws(&mut self) {
        while self.i < self.s.len() && self.s[self.i].is_ascii_whitespace() {
            self.i += 1;
        }
    }

    fn at_end(&mut self) -> bool {
        self.skip_ws();
        self.i == self.s.len()
    }

    fn peek(&mut self) -> Option<u8> {
        self.skip_ws();
        self.s.get(self.i).copied()
    }

    fn expr(&mut self) -> Option<Expr> {
        let mut e = self.term()?;
        loop {
            match self.peek() {
                Some(b'+') => {
                    self.i += 1;
                    e = e.add(&self.term()?)?;
                }
                Some(b'-') => {
                    self.i += 1;
                    e = e.sub(&self.term()?)?;
                }
                _ => return Some(e),
            }
        }
    }

    fn term(&mut self) -> Option<Expr> {
        let mut e = self.factor()?;
        loop {
            match self.peek() {
                Some(b'*') => {
                    self.i += 1;
                    e = e.mul(&self.factor()?)?;
                }
                Some(b'/') if self.s.get(self.i + 1) == Some(&b'/') => {
                    self.i += 2;
                    let d = self.factor()?.as_constant()?;
                    e = e.floor_div(d)?;
                }
                _ => return Some(e),
            }
        }
    }

    fn factor(&mut self) -> Option<Expr> {
        match self.peek()? {
            b'(' => {
                self.i += 1;
                let e = self.expr()?;
                if self.peek()? != b')' {
                    return None;
                }
                self.i += 1;
                Some(e)
            }
            b'-' => {
                self.i += 1;
                self.factor()?.neg()
            }
            c if c.is_ascii_digit() => {
                let start = self.i;
                while self.i < self.s.len() && self.s[self.i].is_ascii_digit() {
                    self.i += 1;
                }
                let text = std::str::from_utf8(&self.s[start..self.i]).ok()?;
                Some(Expr::constant(text.parse().ok()?))
            }
            c if c.is_ascii_alphabetic() || c == b'_' => {
                let start = self.i;
                while self.i < self.s.len()
                    && (self.s[self.i].is_ascii_alphanumeric()
                        || matches!(self.s[self.i], b'_' | b'.'))
                {
                    self.i += 1;
                }
                let text = std::str::from_utf8(&self.s[start..self.i]).ok()?;
                // A call such as Max(..) is not ours to interpret.
                if self.peek() == Some(b'(') {
                    return None;
                }
                Some(Expr::symbol(text))
            }
            _ => None,
        }
    }
}

/// The expression of a dim (`None` for an unknown dim).
pub fn expr_of(d: &Dim) -> Option<Expr> {
    match d {
        Dim::Known(v) => Some(Expr::constant(*v)),
        Dim::Sym(s) => Some(Expr::parse(s)),
        Dim::Unknown => None,
    }
}

fn lift(a: &Dim, b: &Dim, f: impl Fn(&Expr, &Expr) -> Option<Expr>) -> Dim {
    match (expr_of(a), expr_of(b)) {
        (Some(x), Some(y)) => f(&x, &y).map(|e| e.to_dim()).unwrap_or(Dim::Unknown),
        _ => Dim::Unknown,
    }
}

pub fn add(a: &Dim, b: &Dim) -> Dim {
    if let (Dim::Known(x), Dim::Known(y)) = (a, b) {
        return x.checked_add(*y).map(Dim::Known).unwrap_or(Dim::Unknown);
    }
    lift(a, b, |x, y| x.add(y))
}

pub fn sub(a: &Dim, b: &Dim) -> Dim {
    if let (Dim::Known(x), Dim::Known(y)) = (a, b) {
        return x.checked_sub(*y).map(Dim::Known).unwrap_or(Dim::Unknown);
    }
    lift(a, b, |x, y| x.sub(y))
}

pub fn mul(a: &Dim, b: &Dim) -> Dim {
    if let (Dim::Known(x), Dim::Known(y)) = (a, b) {
        return x.checked_mul(*y).map(Dim::Known).unwrap_or(Dim::Unknown);
    }
    // 0 times anything is 0, even an unknown.
    if matches!(a, Dim::Known(0)) || matches!(b, Dim::Known(0)) {
        return Dim::Known(0);
    }
    lift(a, b, |x, y| x.mul(y))
}

/// Product of dims (1 for none).
pub fn product<'a>(dims: impl IntoIterator<Item = &'a Dim>) -> Dim {
    dims.into_iter().fold(Dim::Known(1), |acc, d| mul(&acc, d))
}

/// Exact quotient `a / b`, or Unknown when it cannot be shown to be exact.
pub fn div_exact(a: &Dim, b: &Dim) -> Dim {
    if let (Dim::Known(x), Dim::Known(y)) = (a, b) {
        return if *y != 0 && x % y == 0 {
            Dim::Known(x / y)
        } else {
            Dim::Unknown
        };
    }
    lift(a, b, |x, y| x.div_exact(y))
}

/// `floor(a / d)` for a constant `d > 0`.
pub fn floor_div(a: &Dim, d: i64) -> Dim {
    if d <= 0 {
        return Dim::Unknown;
    }
    match a {
        Dim::Known(x) => Dim::Known(x.div_euclid(d)),
        _ => expr_of(a)
            .and_then(|e| e.floor_div(d))
            .map(|e| e.to_dim())
            .unwrap_or(Dim::Unknown),
    }
}

/// `ceil(a / d)` for a constant `d > 0`.
pub fn ceil_div(a: &Dim, d: i64) -> Dim {
    if d <= 0 {
        return Dim::Unknown;
    }
    match a {
        Dim::Known(x) => Dim::Known((x + d - 1).div_euclid(d)),
        _ => expr_of(a)
            .and_then(|e| e.ceil_div(d))
            .map(|e| e.to_dim())
            .unwrap_or(Dim::Unknown),
    }
}

/// The dim with bound symbols replaced by their values.
pub fn substitute(d: &Dim, bindings: &BTreeMap<String, i64>) -> Dim {
    match d {
        Dim::Sym(s) => Expr::parse(s)
            .substitute(bindings)
            .map(|e| e.to_dim())
            .unwrap_or_else(|| d.clone()),
        _ => d.clone(),
    }
}

/// Canonical form of a dim (`batch*2` → `2*batch`, `3` → Known(3)).
pub fn canonical(d: &Dim) -> Dim {
    match d {
        Dim::Sym(s) => Expr::parse(s).to_dim(),
        _ => d.clone(),
    }
}

/// Symbol names a dim mentions.
pub fn symbols_of(d: &Dim) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    if let Dim::Sym(s) = d {
        Expr::parse(s).symbols(&mut out);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(x: &str) -> Dim {
        Dim::Sym(x.to_string())
    }

    #[test]
    fn canonical_printing() {
        assert_eq!(add(&s("seq"), &Dim::Known(1)), s("seq+1"));
        assert_eq!(mul(&s("heads"), &s("batch")), s("batch*heads"));
        assert_eq!(mul(&Dim::Known(2), &s("batch")), s("2*batch"));
        assert_eq!(canonical(&s("batch * 2")), s("2*batch"));
        assert_eq!(sub(&s("seq"), &Dim::Known(1)), s("seq-1"));
        assert_eq!(sub(&s("seq"), &s("seq")), Dim::Known(0));
        assert_eq!(add(&s("seq-1"), &Dim::Known(1)), s("seq"));
        assert_eq!(canonical(&s("seq+1+batch*seq")), s("batch*seq+seq+1"));
        assert_eq!(mul(&Dim::Unknown, &Dim::Known(0)), Dim::Known(0));
        assert_eq!(mul(&Dim::Unknown, &s("a")), Dim::Unknown);
    }

    #[test]
    fn a_floor_division_in_a_product_prints_so_that_it_parses_back_the_same() {
        // 2*((h+1)//2): even, one less than h+1 for even h.
        let half = floor_div(&s("h+1"), 2);
        let twice = mul(&Dim::Known(2), &half);
        assert_eq!(twice, s("2*((h+1)//2)"));
        assert_eq!(canonical(&twice), twice);
        let at = |d: &Dim, h: i64| substitute(d, &BTreeMap::from([("h".to_string(), h)]));
        assert_eq!(at(&twice, 256), Dim::Known(256));
        assert_eq!(at(&twice, 255), Dim::Known(256));
        // A product of atoms: w*(h//2), not (w*h)//2.
        let prod = mul(&s("w"), &floor_div(&s("h"), 2));
        assert_eq!(canonical(&prod), prod);
        let at2 = substitute(
            &prod,
            &BTreeMap::from([("h".to_string(), 3), ("w".to_string(), 3)]),
        );
        assert_eq!(at2, Dim::Known(3));
        // Alone with coefficient 1, as before.
        assert_eq!(half, s("(h+1)//2"));
        // tf2onnx's floor-mod of a padded height by a dilation rate of 3,
        // x - (x//3)*3, stays symbolic: it is 0 for no x but multiples of 3.
        let x = add(&twice, &Dim::Known(6));
        let rem = sub(&x, &mul(&floor_div(&x, 3), &Dim::Known(3)));
        assert!(matches!(rem, Dim::Sym(_)), "{rem:?}");
        assert_eq!(at(&rem, 256), Dim::Known(262 % 3));
    }

    #[test]
    fn division() {
        assert_eq!(div_exact(&s("32*batch*seq"), &s("32*batch")), s("seq"));
        assert_eq!(div_exact(&s("batch*seq"), &Dim::Known(2)), Dim::Unknown);
        assert_eq!(div_exact(&s("2*batch"), &Dim::Known(2)), s("batch"));
        assert_eq!(floor_div(&s("h+2"), 2), s("h//2+1"));
        assert_eq!(floor_div(&s("h-1"), 2), s("(h+1)//2-1"));
        assert_eq!(ceil_div(&s("h"), 2), s("(h+1)//2"));
        assert_eq!(floor_div(&Dim::Known(-3), 2), Dim::Known(-2));
    }

    #[test]
    fn parse_and_substitute() {
        let b: BTreeMap<String, i64> = [("h".to_string(), 7), ("batch".to_string(), 3)].into();
        assert_eq!(substitute(&s("(h+1)//2"), &b), Dim::Known(4));
        assert_eq!(substitute(&s("2*batch*seq"), &b), s("6*seq"));
        assert_eq!(substitute(&s("Max(1, h)"), &b), s("Max(1, h)"));
        assert_eq!(canonical(&s("Max(1, h)")), s("Max(1, h)"));
        assert_eq!(canonical(&s("/bert/x")), s("/bert/x"));
        assert_eq!(canonical(&s("unk__3")), s("unk__3"));
        let mut syms = BTreeSet::new();
        Expr::parse("(h+w)//2*batch").symbols(&mut syms);
        assert_eq!(
            syms.into_iter().collect::<Vec<_>>(),
            vec!["batch", "h", "w"]
        );
    }
}

//! Arrow column accumulators shared by the kernels. Arrow's builders cost an out-of-line call per
//! append, which dominated the per-row loops of `decode_metadata`, `explode_messages` and the
//! entry-log scan; these are plain vector stores, and build no bitmap for all-valid or all-null columns.
use arrow_array::types::{ArrowPrimitiveType, GenericBinaryType};
use arrow_array::{
    ArrayRef, BinaryArray, BooleanArray, GenericByteArray, GenericStringArray, MapArray, OffsetSizeTrait,
    PrimitiveArray, StringArray, StructArray,
};
use arrow_buffer::{BooleanBuffer, Buffer, NullBuffer, OffsetBuffer};
use arrow_schema::{DataType, Field};
use std::sync::Arc;

use crate::error::{Error, Result};

/// What a [`Slots`] column becomes: a primitive Arrow type, or [`Bool`].
pub(crate) trait SlotArray {
    type Value: Copy + Default;
    fn build(vals: Vec<Self::Value>, nulls: Option<NullBuffer>) -> ArrayRef;
}

impl<T: ArrowPrimitiveType> SlotArray for T {
    type Value = T::Native;
    fn build(vals: Vec<T::Native>, nulls: Option<NullBuffer>) -> ArrayRef {
        Arc::new(PrimitiveArray::<T>::new(vals.into(), nulls))
    }
}

/// Booleans (Arrow's `BooleanType` is not primitive: its values are bits).
pub(crate) struct Bool;

impl SlotArray for Bool {
    type Value = bool;
    fn build(vals: Vec<bool>, nulls: Option<NullBuffer>) -> ArrayRef {
        Arc::new(BooleanArray::new(BooleanBuffer::from(vals), nulls))
    }
}

/// Fixed-width values with their validity, either written by row index into `n` slots (`set`, for
/// `decode_metadata`'s one row per input) or appended (`push`, for outputs whose row count is known
/// only at the end). A present value is plain stores and an absent one bumps a counter, so all-valid
/// and all-null columns (the common cases) build no bitmap.
pub(crate) struct Slots<A: SlotArray> {
    vals: Vec<A::Value>,
    valid: Vec<bool>,
    nulls: usize,
}

pub(crate) type Prim<T> = Slots<T>;
pub(crate) type Bools = Slots<Bool>;

impl<A: SlotArray> Slots<A> {
    /// `n` unset (null) slots, for [`Self::set`].
    pub(crate) fn new(n: usize) -> Self {
        Slots { vals: vec![A::Value::default(); n], valid: vec![false; n], nulls: n }
    }
    /// Room for `n` values, for [`Self::push`].
    pub(crate) fn with_capacity(n: usize) -> Self {
        Slots { vals: Vec::with_capacity(n), valid: Vec::with_capacity(n), nulls: 0 }
    }
    /// Slot `i` (set at most once); an absent value is no store at all, since columns that are
    /// mostly absent (chunking, markers, transactions) are the common case.
    #[inline(always)]
    pub(crate) fn set(&mut self, i: usize, v: Option<A::Value>) {
        if let Some(x) = v {
            self.vals[i] = x;
            self.valid[i] = true;
            self.nulls -= 1;
        }
    }
    #[inline(always)]
    pub(crate) fn push(&mut self, v: Option<A::Value>) {
        self.vals.push(v.unwrap_or_default());
        self.valid.push(v.is_some());
        self.nulls += usize::from(v.is_none());
    }
    /// `k` copies of `v` (a value shared by a batch's messages): two fills, no per-row branch.
    #[inline]
    pub(crate) fn push_repeat(&mut self, v: Option<A::Value>, k: usize) {
        self.vals.resize(self.vals.len() + k, v.unwrap_or_default());
        self.valid.resize(self.valid.len() + k, v.is_some());
        self.nulls += if v.is_none() { k } else { 0 };
    }
    /// Present values, appended column-wise (the vector's length stays in a register).
    #[inline]
    pub(crate) fn push_all(&mut self, vals: impl ExactSizeIterator<Item = A::Value>) {
        let k = vals.len();
        self.vals.extend(vals);
        self.valid.resize(self.valid.len() + k, true);
    }
    /// Optional values, appended column-wise: `f` is called twice per row (value, then validity).
    #[inline]
    pub(crate) fn push_each<T>(&mut self, rows: &[T], f: impl Fn(&T) -> Option<A::Value>) {
        self.vals.extend(rows.iter().map(|r| f(r).unwrap_or_default()));
        let before = self.valid.len();
        self.valid.extend(rows.iter().map(|r| f(r).is_some()));
        self.nulls += self.valid[before..].iter().filter(|&&v| !v).count();
    }
    pub(crate) fn finish(self) -> ArrayRef {
        let nulls = nulls(self.valid, self.nulls);
        A::build(self.vals, nulls)
    }
}

/// Row values whose validity is not their own but the rows' (a value every decoded row has: null
/// exactly where the row is), appended in row order: one store per row, the validity built once.
pub(crate) struct Dense<A: SlotArray> {
    vals: Vec<A::Value>,
}

impl<A: SlotArray> Dense<A> {
    pub(crate) fn new(n: usize) -> Self {
        Dense { vals: Vec::with_capacity(n) }
    }
    #[inline(always)]
    pub(crate) fn push(&mut self, v: A::Value) {
        self.vals.push(v);
    }
    /// A row without a value (a null row): the default value under the rows' null.
    #[inline(always)]
    pub(crate) fn skip(&mut self) {
        self.vals.push(A::Value::default());
    }
    pub(crate) fn finish(self, rows: &Option<NullBuffer>) -> ArrayRef {
        A::build(self.vals, rows.clone())
    }
}

/// The validity of a batch's rows, shared by its [`Dense`] columns.
pub(crate) struct RowValidity {
    valid: Vec<bool>,
    nulls: usize,
}

impl RowValidity {
    pub(crate) fn new(n: usize) -> Self {
        RowValidity { valid: Vec::with_capacity(n), nulls: 0 }
    }
    #[inline(always)]
    pub(crate) fn push(&mut self, ok: bool) {
        self.valid.push(ok);
        self.nulls += usize::from(!ok);
    }
    pub(crate) fn finish(self) -> Option<NullBuffer> {
        nulls(self.valid, self.nulls)
    }
}

/// Appends `b` to `data`. Metadata strings are a few to a few dozen bytes, for which a call to
/// `memcpy` (what `extend_from_slice` becomes for a length unknown at compile time) costs more than
/// the copy: up to 32 bytes are copied as two overlapping words.
#[inline(always)]
fn append_small(data: &mut Vec<u8>, b: &[u8]) {
    let n = b.len();
    if n > 32 {
        data.extend_from_slice(b);
        return;
    }
    data.reserve(n);
    // SAFETY: `reserve` left room for `n` more bytes after `len`; every read lies inside `b`
    // (each word starts at 0 or at n - width, with width <= n) and every write inside the reserved
    // room; `set_len` covers exactly the `n` bytes written.
    unsafe {
        let src = b.as_ptr();
        let dst = data.as_mut_ptr().add(data.len());
        macro_rules! two_words {
            ($t:ty, $w:expr) => {{
                std::ptr::write_unaligned(dst as *mut $t, std::ptr::read_unaligned(src as *const $t));
                std::ptr::write_unaligned(
                    dst.add(n - $w) as *mut $t,
                    std::ptr::read_unaligned(src.add(n - $w) as *const $t),
                );
            }};
        }
        if n >= 16 {
            two_words!(u128, 16);
        } else if n >= 8 {
            two_words!(u64, 8);
        } else if n >= 4 {
            two_words!(u32, 4);
        } else {
            for k in 0..n {
                *dst.add(k) = *src.add(k);
            }
        }
        data.set_len(data.len() + n);
    }
}

/// Variable-width values with i32 offsets, appended in row order, built as Binary ([`Strs`] for Utf8).
/// A column made with `dense` takes its validity from the rows ([`Dense`]), one made with `new`
/// keeps its own.
pub(crate) struct Var {
    offsets: Vec<i32>,
    data: Vec<u8>,
    valid: Vec<bool>,
    nulls: usize,
}

impl Var {
    pub(crate) fn new(n: usize, bytes: usize) -> Self {
        let mut v = Self::dense(n, bytes);
        v.valid = vec![false; n];
        v
    }
    pub(crate) fn dense(n: usize, bytes: usize) -> Self {
        let mut offsets = Vec::with_capacity(n + 1);
        offsets.push(0);
        Var { offsets, data: Vec::with_capacity(bytes), valid: Vec::new(), nulls: 0 }
    }
    /// Row `i` of a column made with `new`.
    #[inline(always)]
    pub(crate) fn push(&mut self, i: usize, v: Option<&[u8]>) {
        match v {
            Some(b) => {
                self.valid[i] = true;
                self.push_value(b);
            }
            None => {
                self.nulls += 1;
                self.skip();
            }
        }
    }
    /// The next row's value, validity aside.
    #[inline(always)]
    pub(crate) fn push_value(&mut self, b: &[u8]) {
        append_small(&mut self.data, b);
        self.end_row();
    }
    /// The next row, empty (under a null).
    #[inline(always)]
    pub(crate) fn skip(&mut self) {
        self.end_row();
    }
    #[inline(always)]
    fn end_row(&mut self) {
        // Truncated past 2 GiB of values, which `parts` refuses: one check per column, not per row.
        self.offsets.push(self.data.len() as i32);
    }
    fn parts(self, rows: Option<&Option<NullBuffer>>) -> Result<(OffsetBuffer<i32>, Buffer, Option<NullBuffer>)> {
        offsets_fit::<i32>(self.data.len())?;
        let nulls = match rows {
            Some(rows) => rows.clone(),
            None => nulls(self.valid, self.nulls),
        };
        // SAFETY: the offsets start at 0 and each is the data's length after a row was appended, so
        // they never decrease and the last is the data's length.
        let offsets = unsafe { OffsetBuffer::new_unchecked(self.offsets.into()) };
        Ok((offsets, Buffer::from_vec(self.data), nulls))
    }
    /// A Binary column with its own validity (`new`), or the rows' (`dense`, `Some(rows)`).
    pub(crate) fn finish(self, rows: Option<&Option<NullBuffer>>) -> Result<ArrayRef> {
        let (offsets, values, nulls) = self.parts(rows)?;
        // SAFETY: offsets as in `parts`; any bytes are valid binary.
        Ok(Arc::new(unsafe { BinaryArray::new_unchecked(offsets, values, nulls) }))
    }
}

/// A Utf8 [`Var`]: only `&str` values go in, so its buffer needs no validation when it is built.
pub(crate) struct Strs(Var);

impl Strs {
    pub(crate) fn new(n: usize, bytes: usize) -> Self {
        Strs(Var::new(n, bytes))
    }
    pub(crate) fn dense(n: usize, bytes: usize) -> Self {
        Strs(Var::dense(n, bytes))
    }
    #[inline(always)]
    pub(crate) fn push(&mut self, i: usize, v: Option<&str>) {
        self.0.push(i, v.map(str::as_bytes));
    }
    #[inline(always)]
    pub(crate) fn push_value(&mut self, v: &str) {
        self.0.push_value(v.as_bytes());
    }
    #[inline(always)]
    pub(crate) fn skip(&mut self) {
        self.0.skip();
    }
    pub(crate) fn finish(self, rows: Option<&Option<NullBuffer>>) -> Result<ArrayRef> {
        let (offsets, values, nulls) = self.0.parts(rows)?;
        // SAFETY: offsets as in `Var::parts`; the values are whole `&str`s one after another, so the
        // buffer is UTF-8 and every offset falls on a character boundary.
        Ok(Arc::new(unsafe { StringArray::new_unchecked(offsets, values, nulls) }))
    }
}

/// Arrow's limit on the values of a column with 32-bit offsets (2 GiB), as an error: a call given that
/// much input gets `LimitExceededError` and can pass smaller batches, instead of an arrow builder's panic.
/// `what` names the column and what to pass less of; `size` is what it would have held.
pub(crate) fn column_too_large(what: &str, size: usize) -> Error {
    Error::LimitExceeded { what: what.into(), size: size as u64, limit: i32::MAX as u64 }
}

fn offsets_fit<O: OffsetSizeTrait>(len: usize) -> Result<()> {
    match O::from_usize(len) {
        None => Err(column_too_large("the values of one 32-bit-offset column (pass smaller batches)", len)),
        Some(_) => Ok(()),
    }
}

pub(crate) fn nulls(valid: Vec<bool>, count: usize) -> Option<NullBuffer> {
    match count {
        0 => None,
        c if c == valid.len() => Some(NullBuffer::new_null(c)),
        _ => Some(NullBuffer::from(valid)),
    }
}

/// Variable-width values appended in row order, with `O` offsets.
pub(crate) struct PushVar<O: OffsetSizeTrait> {
    offsets: Vec<O>,
    data: Vec<u8>,
    valid: Vec<bool>,
    nulls: usize,
    /// The bytes a refused `push_repeat` would have made the column hold (see there).
    too_large: Option<usize>,
}

impl<O: OffsetSizeTrait> PushVar<O> {
    pub(crate) fn new(n: usize, bytes: usize) -> Self {
        let mut offsets = Vec::with_capacity(n + 1);
        offsets.push(O::zero());
        PushVar { offsets, data: Vec::with_capacity(bytes), valid: Vec::with_capacity(n), nulls: 0, too_large: None }
    }
    #[inline(always)]
    pub(crate) fn push(&mut self, v: Option<&[u8]>) {
        if let Some(b) = v {
            if b.len() <= 16 {
                // Keys, property strings and small payloads: a byte loop beats a memcpy call.
                self.data.reserve(16);
                for &x in b {
                    self.data.push(x);
                }
            } else {
                self.data.extend_from_slice(b);
            }
        }
        self.valid.push(v.is_some());
        self.nulls += usize::from(v.is_none());
        // Truncated past what `O` holds, which `parts` refuses: one check per column, not per row.
        self.offsets.push(O::usize_as(self.data.len()));
    }
    /// `k` copies of `v` (a value shared by a batch's messages). The only place a column grows by more
    /// than its input: a 1 MB producer name over 170 k declared messages would be 170 GB. Past 2 GiB the
    /// copies are not made (the rows stay, empty) and the column refuses to finish (`LimitExceeded`).
    #[inline]
    pub(crate) fn push_repeat(&mut self, v: Option<&[u8]>, k: usize) {
        let b = v.unwrap_or_default();
        let need = b.len().checked_mul(k).and_then(|n| n.checked_add(self.data.len()));
        match need {
            Some(n) if n <= i32::MAX as usize => {}
            _ => self.too_large = Some(need.unwrap_or(usize::MAX)), // (`is_none_or` needs Rust 1.82)
        }
        if b.is_empty() || self.too_large.is_some() {
            let end = *self.offsets.last().expect("offsets start with 0");
            self.offsets.resize(self.offsets.len() + k, end);
        } else {
            self.data.reserve(b.len() * k);
            for _ in 0..k {
                self.data.extend_from_slice(b);
                self.offsets.push(O::usize_as(self.data.len()));
            }
        }
        self.valid.resize(self.valid.len() + k, v.is_some());
        self.nulls += if v.is_none() { k } else { 0 };
    }
    /// Room for `bytes` more value bytes; false when the allocator refuses.
    pub(crate) fn reserve(&mut self, bytes: usize) -> bool {
        self.data.try_reserve_exact(bytes).is_ok()
    }
    /// A string value (for the UTF-8 columns).
    #[inline(always)]
    pub(crate) fn push_str(&mut self, v: &str) {
        self.push(Some(v.as_bytes()));
    }
    pub(crate) fn parts(self) -> Result<(OffsetBuffer<O>, Buffer, Option<NullBuffer>)> {
        if let Some(n) = self.too_large {
            return Err(column_too_large("a value repeated for every message of a batch (pass fewer entries)", n));
        }
        offsets_fit::<O>(self.data.len())?;
        let nulls = nulls(self.valid, self.nulls);
        Ok((OffsetBuffer::new(self.offsets.into()), Buffer::from_vec(self.data), nulls))
    }
    pub(crate) fn binary(self) -> Result<ArrayRef> {
        let (o, v, n) = self.parts()?;
        Ok(Arc::new(GenericByteArray::<GenericBinaryType<O>>::try_new(o, v, n).expect("offsets are consistent")))
    }
    pub(crate) fn utf8(self) -> Result<ArrayRef> {
        let (o, v, n) = self.parts()?;
        // Every value pushed was checked as UTF-8 (try_new checks the buffer again, in one pass).
        Ok(Arc::new(GenericStringArray::<O>::try_new(o, v, n).expect("values are UTF-8")))
    }
}

/// `map<string, string>` as Arrow's `MapBuilder` lays it out (entries/keys/values, unsorted).
pub(crate) struct PushMap {
    offsets: Vec<i32>,
    keys: PushVar<i32>,
    values: PushVar<i32>,
    valid: Vec<bool>,
    nulls: usize,
}

impl PushMap {
    pub(crate) fn new(n: usize) -> Self {
        let mut offsets = Vec::with_capacity(n + 1);
        offsets.push(0);
        PushMap {
            offsets,
            keys: PushVar::new(0, 0),
            values: PushVar::new(0, 0),
            valid: Vec::with_capacity(n),
            nulls: 0,
        }
    }
    #[inline(always)]
    pub(crate) fn push<'a>(&mut self, kvs: Option<impl Iterator<Item = (&'a [u8], &'a [u8])>>) {
        self.valid.push(kvs.is_some());
        self.nulls += usize::from(kvs.is_none());
        for (k, v) in kvs.into_iter().flatten() {
            self.keys.push(Some(k));
            self.values.push(Some(v));
        }
        // Truncated past 2^31 entries, which `finish_named` refuses.
        self.offsets.push(self.keys.valid.len() as i32);
    }
    /// `k` empty maps (a batch whose messages have no properties).
    #[inline]
    pub(crate) fn push_empty(&mut self, k: usize) {
        let end = *self.offsets.last().expect("offsets start with 0");
        self.offsets.resize(self.offsets.len() + k, end);
        self.valid.resize(self.valid.len() + k, true);
    }
    pub(crate) fn fields() -> arrow_schema::Fields {
        Self::named("keys", "values")
    }
    /// The entries' fields: keys never null, values nullable.
    pub(crate) fn named(key: &str, value: &str) -> arrow_schema::Fields {
        vec![Field::new(key, DataType::Utf8, false), Field::new(value, DataType::Utf8, true)].into()
    }
    pub(crate) fn finish(self) -> Result<ArrayRef> {
        self.finish_named(Self::fields())
    }
    /// The map with the entries' fields named as given (pyarrow's `map_` names them `key`, `value`).
    pub(crate) fn finish_named(self, fields: arrow_schema::Fields) -> Result<ArrayRef> {
        if self.keys.valid.len() > i32::MAX as usize {
            return Err(column_too_large(
                "the entries of one map column (pass smaller batches)",
                self.keys.valid.len(),
            ));
        }
        let nulls = nulls(self.valid, self.nulls);
        let entries = StructArray::new(fields.clone(), vec![self.keys.utf8()?, self.values.utf8()?], None);
        let field = Arc::new(Field::new("entries", DataType::Struct(fields), false));
        Ok(Arc::new(
            MapArray::try_new(field, OffsetBuffer::new(self.offsets.into()), entries, nulls, false)
                .expect("map offsets are consistent"),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A column `len` bytes long whose pages are never touched (a zeroed allocation is mapped lazily).
    fn untouched(len: usize) -> Vec<u8> {
        vec![0u8; len]
    }

    #[test]
    fn more_than_2_gib_of_values_is_an_error_not_a_panic() {
        let big = i32::MAX as usize + 1;
        let mut v = Var::dense(1, 0);
        v.data = untouched(big);
        v.skip();
        let err = v.finish(Some(&None)).unwrap_err();
        assert!(matches!(err, Error::LimitExceeded { size, .. } if size == big as u64), "{err}");
        assert!(err.to_string().contains("pass smaller batches"), "{err}");

        let mut p = PushVar::<i32>::new(1, 0);
        p.data = untouched(big);
        p.push(Some(b"x"));
        assert!(matches!(p.utf8(), Err(Error::LimitExceeded { .. })));
        // 64-bit offsets hold it
        let mut p = PushVar::<i64>::new(1, 0);
        p.data = untouched(big);
        p.push(Some(b"x"));
        assert_eq!(p.binary().unwrap().len(), 1);
    }

    #[test]
    fn a_value_repeated_past_2_gib_is_refused_without_being_copied() {
        // a 1 MB producer name over 170 k declared messages: 170 GB if copied
        let name = vec![b'p'; 1 << 20];
        let mut p = PushVar::<i32>::new(0, 0);
        p.push_repeat(Some(&name), 170_000);
        assert!(p.data.is_empty() && p.offsets.len() == 170_001);
        let err = p.utf8().unwrap_err();
        assert!(matches!(err, Error::LimitExceeded { size, .. } if size == 170_000u64 << 20), "{err}");
        let mut p = PushVar::<i64>::new(0, 0); // 64-bit offsets too: the copies, not the offsets, are the risk
        p.push_repeat(Some(&name), 4096);
        assert!(p.data.is_empty() && matches!(p.binary(), Err(Error::LimitExceeded { .. })));
        // up to the limit the copies are made
        let mut p = PushVar::<i32>::new(0, 0);
        p.push_repeat(Some(b"ab"), 3);
        assert_eq!(p.utf8().unwrap().len(), 3);
    }

    #[test]
    fn a_column_at_the_limit_is_built() {
        assert!(offsets_fit::<i32>(i32::MAX as usize).is_ok());
        assert!(offsets_fit::<i32>(i32::MAX as usize + 1).is_err());
        let mut p = PushVar::<i32>::new(2, 4);
        p.push(Some(b"ab"));
        p.push(None);
        p.push_repeat(Some(b"c"), 2);
        let a = p.binary().unwrap();
        let a = a.as_any().downcast_ref::<BinaryArray>().unwrap();
        assert_eq!(a.iter().collect::<Vec<_>>(), vec![Some(&b"ab"[..]), None, Some(b"c"), Some(b"c")]);
    }
}

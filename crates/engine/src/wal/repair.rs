//! Page repair from the log (BUF-9, WAL-8): a page's last full-page image
//! and the changes after it, and for an In-Page Logging space restarting
//! without redo, only those before `L*` and outside every restart's hole
//! (REC-4).

use super::*;

impl Wal {
    /// The next record of a reader that has not reached `durable_lsn`: the
    /// log ending before it is damage.
    fn next_before(
        reader: &mut LogReader,
        durable_lsn: u64,
        layout: &LogLayout,
    ) -> Result<LogRecord> {
        reader.next_record()?.ok_or_else(|| Error::LogDamaged {
            lsn: reader.end_lsn(),
            offset_bytes: layout.offset_of(reader.end_lsn()),
            problem: format!("the log ends before its durable end at LSN {durable_lsn}"),
        })
    }

    /// The holes that restarts without redo left for page `id`'s space in
    /// the durable log since `start_lsn`: `[L*, restart record)` of each
    /// ([`Body::Restart`], REC-4).
    fn restart_holes(
        &self,
        id: PageId,
        start_lsn: u64,
        durable_lsn: u64,
    ) -> Result<Vec<(u64, u64)>> {
        let mut holes = Vec::new();
        let mut reader = self.reader(start_lsn);
        while reader.end_lsn() < durable_lsn {
            let record = Self::next_before(&mut reader, durable_lsn, &self.layout)?;
            match record.body {
                Body::Restart { space, from_lsn } if space == id.space => {
                    holes.push((from_lsn, record.lsn));
                }
                _ => {}
            }
        }
        Ok(holes)
    }

    /// Rebuild page `id` from the log: its last full-page image at or after
    /// the log start, and every change after it, up to the durable end,
    /// or only those before `before_lsn` (a record boundary). Returns the image, its page LSN set to the end of the last record
    /// that changed it, and that record's LSN. A page with no image in the
    /// log cannot be rebuilt: that is an error, never an older image
    /// (WAL-8). Holds no log lock while reading.
    pub fn rebuild_page(
        &self,
        id: PageId,
        page_bytes: usize,
        before_lsn: Option<u64>,
    ) -> Result<(Vec<u8>, u64)> {
        let (start_lsn, durable_lsn) = {
            let st = self.state.lock();
            (st.start_lsn, st.flushed_lsn)
        };
        // Records before `before_lsn` only (a record boundary: an In-Page
        // Logging space's `L*`, REC-4).
        let stop_lsn = durable_lsn.min(before_lsn.unwrap_or(u64::MAX));
        // An In-Page Logging page (`before_lsn` given) never received the
        // records in an earlier restart's hole (REC-4).
        let holes = match before_lsn {
            Some(_) => self.restart_holes(id, start_lsn, durable_lsn)?,
            None => Vec::new(),
        };
        let in_hole = |lsn: u64| holes.iter().any(|&(from, to)| (from..to).contains(&lsn));
        let mut image: Option<Vec<u8>> = None;
        let mut last = (0, 0);
        let mut unlogged_at = None;
        let mut reader = self.reader(start_lsn);
        while reader.end_lsn() < stop_lsn {
            let record = Self::next_before(&mut reader, durable_lsn, &self.layout)?;
            if in_hole(record.lsn) {
                continue;
            }
            // BULK-6: the page's contents from here on are not in the log;
            // an image before this record would rebuild an older page.
            if let Body::Unlogged { space, pages } = &record.body
                && *space == id.space
                && pages.contains(&id.page_no)
            {
                image = None;
                unlogged_at = Some(record.lsn);
            }
            for redo in record.body.redo().iter().filter(|r| r.page == id) {
                if redo.image {
                    let mut fresh = vec![0u8; page_bytes];
                    page::set_id(&mut fresh, id);
                    image = Some(fresh);
                }
                if let Some(image) = image.as_mut() {
                    crate::wal::record::apply_ranges(image, &redo.ranges, id)?;
                    last = (record.lsn, reader.end_lsn());
                }
            }
        }
        let Some(mut image) = image else {
            if let Some(lsn) = unlogged_at {
                return Err(Error::Open(format!(
                    "page {id} cannot be repaired: a bulk load wrote it without logging it \
                     (record at LSN {lsn}) and the log holds no image of it since"
                )));
            }
            return Err(Error::Open(format!(
                "page {id} cannot be repaired: the log since LSN {start_lsn} holds no image of it{}",
                if self.config.page_images {
                    ""
                } else {
                    " (page images are off)"
                }
            )));
        };
        page::set_lsn(&mut image, last.1);
        Ok((image, last.0))
    }
}

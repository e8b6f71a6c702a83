//! One window of the timeline in one answer, for a view that cannot ask again (a
//! notebook cell drawn where the notebook is, not by a server): the tracks with events
//! in the window, each with its tile, the boxes below a pixel merged as the web
//! timeline merges them.

use serde::Serialize;
use stepscope_model::Profile;

use super::{check_window, Tile, Timeline, Track};

/// The most tracks a window holds: more would not be read in one picture.
pub const MAX_WINDOW_TRACKS: usize = 64;

/// The tracks with events in a window, each with its boxes.
#[derive(Clone, Debug, Serialize)]
pub struct Window {
    pub schema: &'static str,
    pub run: String,
    pub start_ps: i64,
    pub end_ps: i64,
    pub px: u32,
    /// Tracks past `max_tracks` whose events span the window, not drawn.
    pub tracks_left_out: usize,
    pub tracks: Vec<WindowTrack>,
}

/// A track and its boxes over the window.
#[derive(Clone, Debug, Serialize)]
pub struct WindowTrack {
    pub track: Track,
    pub tile: Tile,
}

impl Timeline {
    /// The tracks with events in `[start_ps, end_ps)` (the whole run when both are
    /// `None`), in the timeline's order, at most `max_tracks` of them (and at most
    /// [`MAX_WINDOW_TRACKS`]), each with its first `max_rows` depth rows drawn `px`
    /// pixels wide.
    pub fn window(
        &self,
        profile: &Profile,
        span: (Option<i64>, Option<i64>),
        px: u32,
        max_rows: usize,
        max_tracks: usize,
    ) -> Result<Window, String> {
        let all = self.tracks(profile);
        let (start_ps, end_ps) = (span.0.unwrap_or(all.start_ps), span.1.unwrap_or(all.end_ps));
        check_window(start_ps, end_ps, px)?;
        let max_tracks = max_tracks.min(MAX_WINDOW_TRACKS);
        let within: Vec<Track> =
            all.tracks.into_iter().filter(|t| t.events > 0 && t.start_ps < end_ps && t.end_ps > start_ps).collect();
        let mut tracks = Vec::new();
        let mut left_out = 0;
        for track in within {
            if tracks.len() == max_tracks {
                left_out += 1;
                continue;
            }
            let tile = self.tile(profile, track.id, (start_ps, end_ps, px), max_rows)?;
            // A track whose span covers the window may still have no event in it.
            if tile.events > 0 {
                tracks.push(WindowTrack { track, tile });
            }
        }
        Ok(Window {
            schema: "stepscope.timeline_window/1",
            run: profile.run.clone(),
            start_ps,
            end_ps,
            px,
            tracks_left_out: left_out,
            tracks,
        })
    }
}

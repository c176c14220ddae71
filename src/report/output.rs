//! Writing a rendered report to a file: the format from the extension, and all or nothing
//! (a temporary file in the same folder, renamed into place once complete).

use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use tempfile::NamedTempFile;

use super::{Html, Png, Renderer, Svg, View};

/// The file formats bert-explain writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Svg,
    Png,
    Html,
}

impl Format {
    /// The format of a `--figure` path: `.svg` or `.png` (any case).
    pub fn of_figure(path: &Path) -> Result<Self, String> {
        match extension(path).as_deref() {
            Some("svg") => Ok(Self::Svg),
            Some("png") => Ok(Self::Png),
            _ => Err(format!(
                "cannot tell the figure format of {:?}: give a file name ending in .svg or .png",
                path.display().to_string()
            )),
        }
    }

    /// The format of an `--html` path: `.html` or `.htm` (any case).
    pub fn of_html(path: &Path) -> Result<Self, String> {
        match extension(path).as_deref() {
            Some("html" | "htm") => Ok(Self::Html),
            _ => Err(format!(
                "{:?} does not end in .html: give the HTML report a name like report.html",
                path.display().to_string()
            )),
        }
    }

    pub fn renderer(self) -> Box<dyn Renderer> {
        match self {
            Self::Svg => Box::new(Svg),
            Self::Png => Box::new(Png),
            Self::Html => Box::new(Html),
        }
    }
}

/// tempfile names its random temporary file in errors; the user only knows their own path.
fn without_temp_path(error: io::Error) -> io::Error {
    let os = error
        .get_ref()
        .and_then(|inner| inner.source())
        .and_then(|source| source.downcast_ref::<io::Error>())
        .and_then(io::Error::raw_os_error);
    match os {
        Some(code) => io::Error::from_raw_os_error(code),
        None => io::Error::from(error.kind()),
    }
}

fn extension(path: &Path) -> Option<String> {
    Some(path.extension()?.to_str()?.to_ascii_lowercase())
}

/// A file being written: nothing appears at `path` until [`OutputFile::finish`] succeeds,
/// and the temporary file is removed if it fails or the value is dropped.
pub struct OutputFile {
    path: PathBuf,
    format: Format,
    temp: NamedTempFile,
}

impl OutputFile {
    /// Creates the temporary file next to `path` now, so that a missing folder or a folder
    /// without write permission is reported before any work is done.
    pub fn create(path: &Path, format: Format) -> io::Result<Self> {
        let folder = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
        let prefix = format!(".{}.", name.as_deref().unwrap_or("output"));
        let mut builder = tempfile::Builder::new();
        builder.prefix(&prefix).suffix(".tmp");
        // Like any other new file (the umask applies), not tempfile's private 0600.
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            builder.permissions(std::fs::Permissions::from_mode(0o666));
        }
        let temp = builder.tempfile_in(folder).map_err(without_temp_path)?;
        Ok(Self {
            path: path.to_path_buf(),
            format,
            temp,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Renders `view` into the temporary file, then renames it to the final path.
    pub fn finish(self, view: &View) -> io::Result<()> {
        let renderer = self.format.renderer();
        self.finish_with(|out| renderer.render(view, out))
    }

    /// Writes `bytes` (a figure rendered elsewhere) the same way.
    pub fn finish_bytes(self, bytes: &[u8]) -> io::Result<()> {
        self.finish_with(|out| out.write_all(bytes))
    }

    fn finish_with(
        mut self,
        write: impl FnOnce(&mut dyn Write) -> io::Result<()>,
    ) -> io::Result<()> {
        {
            let mut out = BufWriter::new(self.temp.as_file_mut());
            write(&mut out)?;
            out.flush()?;
        }
        self.temp.as_file().sync_all()?;
        self.temp.persist(&self.path).map_err(|e| e.error)?;
        Ok(())
    }
}

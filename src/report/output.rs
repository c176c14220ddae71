//! Writing a rendered report to a file: the format from the extension, and all or nothing
//! (a temporary file in the same folder, renamed into place once complete).

use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use tempfile::NamedTempFile;

use super::{Explained, Html, Png, Renderer, Svg};

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

/// Temporary files being written, removed by [`remove_partial_outputs_on_interrupt`]'s
/// handler when the process is interrupted (Drop does not run then).
static PENDING: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

fn pending() -> std::sync::MutexGuard<'static, Vec<PathBuf>> {
    PENDING
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// On Ctrl-C, SIGTERM or SIGHUP: removes every temporary output file, then exits with
/// status 130. Outputs already in place stay as they were; nothing partial is left.
pub fn remove_partial_outputs_on_interrupt() {
    // Failing to install the handler (one is there already) only loses the cleanup.
    let _ = ctrlc::set_handler(|| {
        for path in pending().iter() {
            let _ = std::fs::remove_file(path);
        }
        std::process::exit(130);
    });
}

/// A file being written: nothing appears at `path` until [`OutputFile::commit`] succeeds,
/// and the temporary file is removed if it fails, the value is dropped or the process is
/// interrupted. A symbolic link at `path` is written through, as the shell's `>` does.
pub struct OutputFile {
    path: PathBuf,
    temp: NamedTempFile,
    _pending: Pending,
}

/// A temporary file's entry in [`PENDING`], removed when the file is done with.
struct Pending(PathBuf);

impl Drop for Pending {
    fn drop(&mut self) {
        pending().retain(|p| *p != self.0);
    }
}

impl OutputFile {
    /// Creates the temporary file next to `path` now, so that a missing folder or a folder
    /// without write permission is reported before any work is done. `inputs` are the
    /// files the run reads: `path` naming one of them (by any spelling or link) is refused.
    pub fn create(path: &Path, inputs: &[&Path]) -> io::Result<Self> {
        // Write where a link points, beside its target, so the rename replaces the target.
        let path = match std::fs::symlink_metadata(path) {
            Ok(m) if m.file_type().is_symlink() => std::fs::canonicalize(path)?,
            _ => path.to_path_buf(),
        };
        if let Some(input) = inputs.iter().find(|input| same_file(input, &path)) {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!(
                    "it is the input file {}, which would be lost; write the output to another file",
                    input.display()
                ),
            ));
        }
        if std::fs::metadata(&path).is_ok_and(|m| !m.is_file()) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "it exists and is not a regular file; give the path of a file",
            ));
        }
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
        // Registered under the lock, so an interrupt cannot fall between creating and registering.
        let mut registry = pending();
        let temp = builder.tempfile_in(folder).map_err(|e| {
            let e = without_temp_path(e);
            let why = match e.kind() {
                io::ErrorKind::NotFound => "its folder does not exist; create it first",
                io::ErrorKind::PermissionDenied => "you may not write in its folder",
                _ => return e,
            };
            io::Error::new(e.kind(), why)
        })?;
        registry.push(temp.path().to_path_buf());
        drop(registry);
        Ok(Self {
            path,
            _pending: Pending(temp.path().to_path_buf()),
            temp,
        })
    }

    /// Where the file will appear.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The temporary file, to write the content into.
    pub fn writer(&mut self) -> &mut std::fs::File {
        self.temp.as_file_mut()
    }

    /// Renders `shown` in `format` into the temporary file, then puts it in place.
    pub fn finish(mut self, shown: &Explained, format: Format) -> io::Result<()> {
        {
            let mut out = BufWriter::new(self.writer());
            format.renderer().render(shown, &mut out)?;
            out.flush()?;
        }
        self.commit()
    }

    /// Flushes what was written to disk and renames the temporary file to the final path.
    pub fn commit(self) -> io::Result<()> {
        self.temp.as_file().sync_all()?;
        self.temp.persist(&self.path).map_err(|e| e.error)?;
        Ok(())
    }
}

/// Whether two paths name the same file (by device and inode on Unix, so that links and
/// other spellings count); false when either does not exist.
fn same_file(a: &Path, b: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let (Ok(a), Ok(b)) = (std::fs::metadata(a), std::fs::metadata(b)) else {
            return false;
        };
        a.dev() == b.dev() && a.ino() == b.ino()
    }
    #[cfg(not(unix))]
    {
        let canonical = |p: &Path| std::fs::canonicalize(p).ok();
        canonical(a).is_some_and(|a| Some(a) == canonical(b))
    }
}

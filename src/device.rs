//! Choosing where the model runs.

use candle_core::Device;

use crate::error::{Error, Result};

/// The `--device` choice.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DeviceChoice {
    /// CUDA if available, then Metal, then the CPU.
    #[default]
    Auto,
    Cpu,
    Cuda,
    Metal,
}

/// The host memory the system says is available to a new allocation (Linux's
/// `MemAvailable`), in bytes; `None` where it does not say.
pub fn available_memory() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// Opens the chosen device.
pub fn device(choice: DeviceChoice) -> Result<Device> {
    match choice {
        DeviceChoice::Cpu => Ok(Device::Cpu),
        DeviceChoice::Cuda => Device::new_cuda(0).map_err(|e| {
            Error::Device(format!(
                "cannot use CUDA: {e}; build bert-explain with --features cuda on a machine with an NVIDIA GPU and driver, or pass --device cpu"
            ))
        }),
        DeviceChoice::Metal => Device::new_metal(0).map_err(|e| {
            Error::Device(format!(
                "cannot use Metal: {e}; build bert-explain with --features metal on a Mac, or pass --device cpu"
            ))
        }),
        DeviceChoice::Auto => {
            if candle_core::utils::cuda_is_available() {
                if let Ok(device) = Device::new_cuda(0) {
                    return Ok(device);
                }
            }
            if candle_core::utils::metal_is_available() {
                if let Ok(device) = Device::new_metal(0) {
                    return Ok(device);
                }
            }
            Ok(Device::Cpu)
        }
    }
}

/// Makes the device's CUDA context current on the calling thread (elsewhere: nothing). A
/// thread that frees device memory without it fails to free it, and cudarc keeps that error
/// for the next device call on any thread (`CUDA_ERROR_INVALID_CONTEXT`, seen on an H100 in
/// batch mode); allocating binds the context, freeing does not.
pub fn bind_to_thread(device: &Device) -> Result<()> {
    #[cfg(feature = "cuda")]
    if let Device::Cuda(cuda) = device {
        cuda.cuda_stream()
            .context()
            .bind_to_thread()
            .map_err(|e| Error::Device(format!("cannot use CUDA from this thread: {e}")))?;
    }
    let _ = device;
    Ok(())
}

/// The name the report gives a device: "cpu", "cuda" or "metal".
pub fn device_name(device: &Device) -> &'static str {
    if device.is_cuda() {
        "cuda"
    } else if device.is_metal() {
        "metal"
    } else {
        "cpu"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_is_always_there() {
        assert_eq!(device_name(&device(DeviceChoice::Cpu).unwrap()), "cpu");
    }

    #[cfg(not(feature = "cuda"))]
    #[test]
    fn cuda_without_the_feature_says_how_to_get_it() {
        let err = device(DeviceChoice::Cuda).unwrap_err();
        assert!(err.to_string().contains("--features cuda"), "{err}");
    }
}

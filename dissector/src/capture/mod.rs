//! Capture files: pcap and pcapng, read and written.

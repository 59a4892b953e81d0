//! The Distbench schema: prost message types generated from
//! `proto/*.proto`, and a descriptor pool of the same files for the text
//! format and for reflection.

use prost::Message;
use prost_reflect::prost_types::{DescriptorProto, FileDescriptorSet};
use prost_reflect::{DescriptorPool, MessageDescriptor};
use std::sync::OnceLock;

#[allow(clippy::all, clippy::pedantic, missing_docs, rustdoc::all)]
mod generated {
    include!(concat!(env!("OUT_DIR"), "/distbench.rs"));
}

pub use generated::*;

/// The encoded `FileDescriptorSet` of the schema, written by the build script.
pub const FILE_DESCRIPTOR_SET: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/distbench_descriptor.bin"));

/// The schema's descriptors, decoded once.
pub fn pool() -> &'static DescriptorPool {
    static POOL: OnceLock<DescriptorPool> = OnceLock::new();
    POOL.get_or_init(|| {
        // The set was produced by protox from our own files at build time;
        // failing to decode it is a build defect, not bad input.
        DescriptorPool::decode(FILE_DESCRIPTOR_SET)
            .expect("the embedded distbench descriptor set decodes")
    })
}

/// The descriptor of the message type `T`, looked up by its full name.
pub fn descriptor<T: prost::Name>() -> Option<MessageDescriptor> {
    pool().get_message_by_name(&T::full_name())
}

/// The schema with every map field seen as a repeated `{ key value }`
/// message, which is what maps are on the wire. Printing through it keeps
/// the entries in encoding order (sorted by key, as prost encodes our
/// `BTreeMap`s) and in upstream's `field { key: .. value: .. }` form.
pub(crate) fn flat_map_pool() -> &'static DescriptorPool {
    static POOL: OnceLock<DescriptorPool> = OnceLock::new();
    POOL.get_or_init(|| {
        let mut set = FileDescriptorSet::decode(FILE_DESCRIPTOR_SET)
            .expect("the embedded distbench descriptor set decodes");
        for file in &mut set.file {
            file.message_type.iter_mut().for_each(clear_map_entries);
        }
        DescriptorPool::from_file_descriptor_set(set)
            .expect("the schema without map entries is still valid")
    })
}

fn clear_map_entries(message: &mut DescriptorProto) {
    if let Some(options) = message.options.as_mut() {
        options.map_entry = None;
    }
    message.nested_type.iter_mut().for_each(clear_map_entries);
}

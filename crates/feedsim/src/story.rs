//! The ranking response: stories of objects, actions and small maps, built
//! at random per request and serialized with protobuf (prost), as FeedSim's
//! leaf does with its Thrift compact payload.

use crate::proto::{Action, Int64List, Object, RankingResponse, Story};
use prost::Message;
use rand::Rng;
use rand::distr::Alphanumeric;
use std::collections::HashMap;

/// Objects per story, actions per story, entries per map, metadata bytes.
pub const OBJECTS: usize = 20;
pub const ACTIONS: usize = 5;
pub const MAP_ENTRIES: usize = 4;
pub const LIST_LEN: usize = 4;
pub const METADATA: usize = 200;
pub const LABEL_LEN: usize = 25;

fn key(rng: &mut impl Rng) -> i32 {
    i32::from(rng.random::<i16>())
}

/// One random story.
pub fn story(rng: &mut impl Rng) -> Story {
    let objects = (0..OBJECTS)
        .map(|_| Object {
            id: rng.random(),
            kind: rng.random_range(0..64),
            weight: rng.random(),
        })
        .collect();
    let actions = (0..ACTIONS)
        .map(|_| Action {
            id: rng.random(),
            kind: rng.random_range(0..16),
            actor: rng.random(),
        })
        .collect();
    let counters: HashMap<i32, i64> = (0..MAP_ENTRIES).map(|_| (key(rng), rng.random())).collect();
    let labels: HashMap<i32, String> = (0..MAP_ENTRIES)
        .map(|_| {
            (
                key(rng),
                rng.sample_iter(Alphanumeric)
                    .take(LABEL_LEN)
                    .map(char::from)
                    .collect(),
            )
        })
        .collect();
    let lists: HashMap<i32, Int64List> = (0..MAP_ENTRIES)
        .map(|_| {
            (
                key(rng),
                Int64List {
                    values: (0..LIST_LEN).map(|_| rng.random()).collect(),
                },
            )
        })
        .collect();
    let mut metadata = vec![0u8; METADATA];
    rng.fill(&mut metadata[..]);
    Story {
        id: rng.random(),
        objects,
        actions,
        counters,
        labels,
        lists,
        metadata,
    }
}

/// A response of `stories` random stories.
pub fn response(stories: usize, rng: &mut impl Rng) -> RankingResponse {
    RankingResponse {
        stories: (0..stories).map(|_| story(rng)).collect(),
    }
}

/// Serializes a response.
pub fn serialize(r: &RankingResponse) -> Vec<u8> {
    r.encode_to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn round_trip() {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(1);
        let r = response(10, &mut rng);
        let bytes = serialize(&r);
        let back = RankingResponse::decode(bytes.as_slice()).unwrap();
        assert_eq!(back, r);
        assert_eq!(back.stories[0].objects.len(), OBJECTS);
        assert_eq!(
            back.stories[0].labels.values().next().unwrap().len(),
            LABEL_LEN
        );
        // Roughly 0.6 to 1.2 KB per story.
        assert!(
            bytes.len() > 10 * 600 && bytes.len() < 10 * 1200,
            "{}",
            bytes.len()
        );
    }
}

/**
 * Runs a group's test files in the order mutation/groups.cjs lists them (the contract suite before the protocol
 * model), not slowest first: with the bailing environment, a mutant the quick cases kill never reaches the slow ones.
 */
const Sequencer = require('@jest/test-sequencer').default;
const { groupNamed } = require('./groups.cjs');

const order = groupNamed(process.env.MUTATE_GROUP ?? '').tests;
const rank = (path) => {
  const index = order.findIndex((file) => path.endsWith(file));
  return index === -1 ? order.length : index;
};

class GroupOrder extends Sequencer {
  sort(tests) {
    return [...tests].sort((a, b) => rank(a.path) - rank(b.path));
  }
}

module.exports = GroupOrder;

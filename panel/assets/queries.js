// Every GraphQL operation the panel sends, in one place. Each is an exported template string without
// interpolation, so panel/queries_test.go can extract them and validate them against the server's schema.

export const VIEWER = /* GraphQL */ `
query Viewer {
  viewer {
    role
    subject
    tenant { id name creditBalance }
  }
}`;

export const SERVERS = /* GraphQL */ `
query Servers($first: Int!, $after: Cursor) {
  servers(first: $first, after: $after, orderBy: {field: NAME, direction: ASC}) {
    totalCount
    pageInfo { hasNextPage endCursor }
    edges {
      node {
        id
        name
        inboundUrl
        deliverPendingOnConnect
        retentionDays
        recipients {
          id
          name
          method
          url
          state
          maxAttempts
          retrySchedule
          cliConnected
        }
      }
    }
  }
}`;

export const SERVER_REQUESTS = /* GraphQL */ `
query ServerRequests($serverId: ID!, $first: Int, $after: Cursor, $last: Int, $before: Cursor, $where: RequestWhereInput) {
  server(id: $serverId) {
    id
    name
    inboundUrl
    recipients { id name method state cliConnected }
  }
  requests(serverId: $serverId, first: $first, after: $after, last: $last, before: $before, where: $where) {
    totalCount
    pageInfo { hasNextPage hasPreviousPage startCursor endCursor }
    edges {
      node {
        id
        method
        path
        query
        receivedAt
        status
        replayOf { id }
        deliveries {
          id
          status
          trigger
          attemptCount
          recipient { id name }
        }
      }
    }
  }
}`;

export const REQUEST = /* GraphQL */ `
query Request($id: ID!) {
  request(id: $id) {
    id
    key
    method
    path
    query
    sourceAddr
    receivedAt
    expiresAt
    status
    bodySize
    headers { name value }
    body
    server { id name }
    replayOf { id }
    replays { id }
    deliveries {
      id
      status
      trigger
      attemptCount
      maxAttempts
      nextAttemptAt
      createdAt
      finishedAt
      recipient { id name method url state cliConnected }
      attempts {
        number
        startedAt
        finishedAt
        status
        httpStatus
        durationMs
        errorKind
        errorMessage
      }
    }
  }
}`;

export const LEDGER = /* GraphQL */ `
query Ledger($first: Int!, $after: Cursor) {
  viewer {
    role
    tenant { id name creditBalance plan { id name monthlyCredits retentionDays } }
  }
  ledger(first: $first, after: $after) {
    totalCount
    pageInfo { hasNextPage endCursor }
    edges {
      node {
        id
        createdAt
        reason
        amount
        balanceAfter
        reference
      }
    }
  }
}`;

export const RETRY_DELIVERY = /* GraphQL */ `
mutation RetryDelivery($id: ID!) {
  retryDelivery(id: $id) { id status trigger }
}`;

export const CANCEL_DELIVERY = /* GraphQL */ `
mutation CancelDelivery($id: ID!) {
  cancelDelivery(id: $id) { id status }
}`;

export const REPLAY_REQUEST = /* GraphQL */ `
mutation ReplayRequest($id: ID!) {
  replayRequest(id: $id) { id status }
}`;

export const DELIVERY_UPDATED_FOR_REQUEST = /* GraphQL */ `
subscription DeliveryUpdatedForRequest($requestId: ID!) {
  deliveryUpdated(requestId: $requestId) { id status attemptCount nextAttemptAt }
}`;

export const DELIVERY_UPDATED_FOR_SERVER = /* GraphQL */ `
subscription DeliveryUpdatedForServer($serverId: ID!) {
  deliveryUpdated(serverId: $serverId) { id status attemptCount nextAttemptAt }
}`;

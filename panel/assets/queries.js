// Every GraphQL operation the panel sends, in one place, grouped by the page that sends it. Each is an
// exported template string without interpolation, so panel/queries_test.go can extract them and validate them
// against the server's schema.

// ---- session -----------------------------------------------------------------------------------------------

export const VIEWER = /* GraphQL */ `
query Viewer {
  viewer {
    role
    subject
    tenant { id name creditBalance }
  }
}`;

export const REDEEM_SIGN_IN_CODE = /* GraphQL */ `
mutation RedeemSignInCode($code: String!) {
  redeemSignInCode(code: $code) { id token expiresAt }
}`;

export const LIMITS = /* GraphQL */ `
query Limits {
  limits {
    nameMaxLength
    retentionDaysMax
    urlMaxLength
    timeoutSecondsMax
    keyGraceSecondsDefault
    keyGraceSecondsMax
    tokenTtlSecondsMin
    tokenTtlSecondsDefault
    tokenTtlSecondsMax
    maxBodyBytes
    outboundBodyMaxBytes
    outboundMaxAttempts
    creditsPerAction
    pageSizeMax
    filterMaxBytes
    responseBodyMaxBytes
    allowedMethodsMax
    verificationToleranceSecondsMax
    verificationSecretMaxBytes
    retrySchedules { schedule minAttempts maxAttempts dueSeconds }
  }
}`;

// ---- plans (operators) -------------------------------------------------------------------------------------

export const PLANS = /* GraphQL */ `
query Plans {
  plans {
    id
    name
    monthlyCredits
    retentionDays
    maxServers
    maxRecipientsPerServer
    maxRequestsPerSecond
    selectable
    createdAt
  }
}`;

export const CREATE_PLAN = /* GraphQL */ `
mutation CreatePlan($input: CreatePlanInput!) {
  createPlan(input: $input) { id name }
}`;

export const UPDATE_PLAN = /* GraphQL */ `
mutation UpdatePlan($id: ID!, $input: UpdatePlanInput!) {
  updatePlan(id: $id, input: $input) { id name }
}`;

// ---- tenants (operators) -----------------------------------------------------------------------------------

export const TENANTS = /* GraphQL */ `
query Tenants($first: Int!, $after: Cursor) {
  tenants(first: $first, after: $after, orderBy: {field: NAME, direction: ASC}) {
    totalCount
    pageInfo { hasNextPage endCursor }
    edges {
      node {
        id
        name
        creditBalance
        createdAt
        plan { id name monthlyCredits }
        usage { period requestsAccepted creditsSpent creditsGranted }
      }
    }
  }
}`;

export const TENANT_OPTIONS = /* GraphQL */ `
query TenantOptions {
  tenants(first: 500, orderBy: {field: NAME, direction: ASC}) {
    edges { node { id name } }
  }
}`;

export const TENANT = /* GraphQL */ `
query Tenant($id: ID!, $tenantId: ID!) {
  node(id: $id) {
    ... on Tenant {
      id
      name
      creditBalance
      createdAt
      plan { id name monthlyCredits retentionDays maxServers maxRecipientsPerServer maxRequestsPerSecond }
      usageHistory(months: 6) { period requestsAccepted manualRetries replays creditsSpent creditsGranted }
      creditsPerDay(days: 7) { day credits requests retries replays outbound }
      servers { id name inboundUrl recipients { id state } }
    }
  }
  ledger(tenantId: $tenantId, first: 20) {
    totalCount
    edges { node { id createdAt reason amount balanceAfter reference } }
  }
}`;

export const CREATE_TENANT = /* GraphQL */ `
mutation CreateTenant($input: CreateTenantInput!) {
  createTenant(input: $input) { id name creditBalance }
}`;

export const GRANT_CREDITS = /* GraphQL */ `
mutation GrantCredits($tenantId: ID!, $amount: Int!, $reference: String) {
  grantCredits(tenantId: $tenantId, amount: $amount, reference: $reference) { id amount balanceAfter }
}`;

export const CHANGE_TENANT_PLAN = /* GraphQL */ `
mutation ChangeTenantPlan($tenantId: ID!, $planId: ID!) {
  changeTenantPlan(tenantId: $tenantId, planId: $planId) { id creditBalance plan { id name monthlyCredits } }
}`;

// ---- tokens ------------------------------------------------------------------------------------------------

export const TOKENS = /* GraphQL */ `
query Tokens($first: Int!, $after: Cursor, $where: TokenWhereInput) {
  tokens(first: $first, after: $after, where: $where, orderBy: {field: CREATED_AT, direction: DESC}) {
    totalCount
    pageInfo { hasNextPage endCursor }
    edges { node { id subject role issuedBy createdAt expiresAt revokedAt tenant { id name } } }
  }
}`;

export const ISSUE_TOKEN = /* GraphQL */ `
mutation IssueToken($input: IssueTokenInput!) {
  issueToken(input: $input) { id token expiresAt }
}`;

export const REVOKE_TOKEN = /* GraphQL */ `
mutation RevokeToken($id: ID!) {
  revokeToken(id: $id) { id revokedAt }
}`;

// ---- servers -----------------------------------------------------------------------------------------------

export const SERVERS = /* GraphQL */ `
query Servers($first: Int!, $after: Cursor, $withTenant: Boolean!) {
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
        maxRequestsPerSecond
        tenant @include(if: $withTenant) { id name }
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

export const SERVER = /* GraphQL */ `
query Server($id: ID!, $withTenant: Boolean!) {
  server(id: $id) {
    id
    name
    createdAt
    inboundUrl
    deliverPendingOnConnect
    retentionDays
    maxRequestsPerSecond
    previousKeyExpiresAt
    deletedAt
    allowedMethods
    eventTypeHeader
    eventTypePath
    schemaValidation
    rejectedCount
    verification {
      kind
      enforce
      headers
      header
      queryParameter
      algorithm
      encoding
      prefix
      toleranceSeconds
      username
      secretCount
    }
    response { status contentType body }
    tenant @include(if: $withTenant) { id name }
    recipients {
      id
      name
      method
      url
      state
      stateReason
      maxAttempts
      retrySchedule
      timeoutSeconds
      sendIdempotencyKey
      maxConcurrency
      cliConnected
      eventTypes
    }
  }
}`;

export const CREATE_SERVER = /* GraphQL */ `
mutation CreateServer($input: CreateServerInput!) {
  createServer(input: $input) { id name inboundUrl }
}`;

export const UPDATE_SERVER = /* GraphQL */ `
mutation UpdateServer($id: ID!, $input: UpdateServerInput!) {
  updateServer(id: $id, input: $input) { id name }
}`;

export const DELETE_SERVER = /* GraphQL */ `
mutation DeleteServer($id: ID!) {
  deleteServer(id: $id) { id deletedAt }
}`;

export const ROTATE_INBOUND_KEY = /* GraphQL */ `
mutation RotateInboundKey($serverId: ID!, $graceSeconds: Int) {
  rotateInboundKey(serverId: $serverId, graceSeconds: $graceSeconds) { id inboundUrl previousKeyExpiresAt }
}`;

export const SERVER_REJECTIONS = /* GraphQL */ `
query ServerRejections($id: ID!, $first: Int!) {
  server(id: $id) {
    id
    rejectedCount
    rejections(first: $first) {
      totalCount
      edges { node { id at method path sourceAddr reason message } }
    }
  }
}`;

// ---- recipients --------------------------------------------------------------------------------------------

export const RECIPIENT = /* GraphQL */ `
query Recipient($id: ID!) {
  node(id: $id) {
    ... on Recipient {
      id
      name
      createdAt
      method
      url
      maxAttempts
      retrySchedule
      sendIdempotencyKey
      timeoutSeconds
      state
      stateReason
      stateChangedAt
      lastSuccessAt
      nextProbeAt
      deletedAt
      cliConnected
      maxConcurrency
      signatureHeaders
      signingSecret
      previousSecretExpiresAt
      filter
      eventTypes
      auth {
        headerNames
        basicUsername
        bearer
        oauth2TokenUrl
        oauth2ClientId
        oauth2Scopes
        clientCertificateSubject
        clientCertificateNotAfter
      }
      destination { exchange routingKey subject stream maxLen topic tls caCertificate hasPassword }
      server { id name inboundUrl deliverPendingOnConnect }
    }
  }
}`;

export const RECIPIENT_STATS = /* GraphQL */ `
query RecipientStats($id: ID!, $hours: Int!) {
  node(id: $id) {
    ... on Recipient {
      id
      hourlyStats(hours: $hours) { hour attempts successes failures successRate p50Ms p95Ms }
    }
  }
}`;

export const SERVER_STATS = /* GraphQL */ `
query ServerStats($id: ID!, $hours: Int!) {
  server(id: $id) {
    id
    requestsPerHour(hours: $hours) { hour requests replays }
  }
}`;

export const CREATE_RECIPIENT = /* GraphQL */ `
mutation CreateRecipient($input: CreateRecipientInput!) {
  createRecipient(input: $input) { id name }
}`;

export const UPDATE_RECIPIENT = /* GraphQL */ `
mutation UpdateRecipient($id: ID!, $input: UpdateRecipientInput!) {
  updateRecipient(id: $id, input: $input) { id name }
}`;

export const ROTATE_RECIPIENT_SECRET = /* GraphQL */ `
mutation RotateRecipientSecret($id: ID!, $graceSeconds: Int) {
  rotateRecipientSecret(id: $id, graceSeconds: $graceSeconds) { id signingSecret previousSecretExpiresAt }
}`;

// FILTER_REQUESTS lists a server's latest requests, for the routing filter's preview.
export const FILTER_REQUESTS = /* GraphQL */ `
query FilterRequests($serverId: ID!, $first: Int!) {
  requests(serverId: $serverId, first: $first) {
    edges { node { id method path receivedAt } }
  }
}`;

export const TEST_FILTER = /* GraphQL */ `
query TestFilter($filter: JSON!, $requestId: ID!) {
  testFilter(filter: $filter, requestId: $requestId) { matches error }
}`;

// RECIPIENT_TRANSFORM is what the transformation editor starts from; polling the recipient leaves it out,
// as it carries every version's source.
export const RECIPIENT_TRANSFORM = /* GraphQL */ `
query RecipientTransform($id: ID!) {
  node(id: $id) {
    ... on Recipient {
      id
      transform { id number source createdBy createdAt }
      transformVersions { id number source createdBy createdAt }
    }
  }
}`;

// TRANSFORM_REQUESTS lists a server's latest requests, for the transformation editor's "Try it".
export const TRANSFORM_REQUESTS = /* GraphQL */ `
query TransformRequests($serverId: ID!, $first: Int!) {
  requests(serverId: $serverId, first: $first) {
    edges { node { id method path eventType receivedAt } }
  }
}`;

export const TRY_TRANSFORM = /* GraphQL */ `
query TryTransform($source: String!, $requestId: ID!) {
  tryTransform(source: $source, requestId: $requestId) {
    cancelled
    method
    path
    query
    headers { name value }
    body
    error
    errorReason
  }
}`;

export const SET_RECIPIENT_TRANSFORM = /* GraphQL */ `
mutation SetRecipientTransform($recipientId: ID!, $source: String!) {
  setRecipientTransform(recipientId: $recipientId, source: $source) {
    id
    transform { id number source createdBy createdAt }
    transformVersions { id number source createdBy createdAt }
  }
}`;

export const DELETE_RECIPIENT = /* GraphQL */ `
mutation DeleteRecipient($id: ID!) {
  deleteRecipient(id: $id) { id deletedAt }
}`;

export const PAUSE_RECIPIENT = /* GraphQL */ `
mutation PauseRecipient($id: ID!) {
  pauseRecipient(id: $id) { id state stateReason }
}`;

export const RESUME_RECIPIENT = /* GraphQL */ `
mutation ResumeRecipient($id: ID!) {
  resumeRecipient(id: $id) { id state stateReason }
}`;

export const ENABLE_RECIPIENT = /* GraphQL */ `
mutation EnableRecipient($id: ID!) {
  enableRecipient(id: $id) { id state stateReason }
}`;

// ---- requests ----------------------------------------------------------------------------------------------

// SERVER_REQUESTS lists a server's requests, or with $search those containing it (search is then set).
export const SERVER_REQUESTS = /* GraphQL */ `
query ServerRequests($serverId: ID!, $first: Int, $after: Cursor, $last: Int, $before: Cursor, $where: RequestWhereInput, $search: String) {
  server(id: $serverId) {
    id
    name
    inboundUrl
    recipients { id name method state cliConnected }
  }
  requests(serverId: $serverId, first: $first, after: $after, last: $last, before: $before, where: $where, search: $search) {
    totalCount
    pageInfo { hasNextPage hasPreviousPage startCursor endCursor }
    search { scanned stoppedEarly examinedTo }
    edges {
      node {
        id
        method
        path
        query
        receivedAt
        status
        eventType
        schemaError
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
    eventType
    schemaError
    bodySize
    headers { name value }
    body
    server { id name }
    replayOf { id }
    replays { id }
    filteredOut { id name method url state cliConnected }
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
        answer
        durationMs
        errorKind
        errorMessage
        transformVersion
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

// ---- bulk jobs ---------------------------------------------------------------------------------------------

export const PLAN_BULK_RETRY = /* GraphQL */ `
query PlanBulkRetry($filter: BulkFilter!) {
  planBulkRetry(filter: $filter) { count credits balance maxCount }
}`;

export const PLAN_BULK_CANCEL = /* GraphQL */ `
query PlanBulkCancel($filter: BulkFilter!) {
  planBulkCancel(filter: $filter) { count credits balance maxCount }
}`;

export const BULK_RETRY = /* GraphQL */ `
mutation BulkRetry($filter: BulkFilter!) {
  bulkRetry(filter: $filter) { id kind status total done failed creditsSpent errorMessage createdAt finishedAt createdBy filter { serverId recipientId status receivedAfter receivedBefore search } }
}`;

export const BULK_CANCEL = /* GraphQL */ `
mutation BulkCancel($filter: BulkFilter!) {
  bulkCancel(filter: $filter) { id kind status total done failed creditsSpent errorMessage createdAt finishedAt createdBy filter { serverId recipientId status receivedAfter receivedBefore search } }
}`;

export const CANCEL_BULK_JOB = /* GraphQL */ `
mutation CancelBulkJob($id: ID!) {
  cancelBulkJob(id: $id) { id status total done failed creditsSpent errorMessage finishedAt }
}`;

export const BULK_JOBS = /* GraphQL */ `
query BulkJobs($first: Int!) {
  bulkJobs(first: $first) {
    totalCount
    edges {
      node { id kind status total done failed creditsSpent errorMessage createdAt finishedAt createdBy filter { serverId recipientId status receivedAfter receivedBefore search } }
    }
  }
}`;

export const BULK_JOB = /* GraphQL */ `
query BulkJob($id: ID!) {
  bulkJob(id: $id) { id kind status total done failed creditsSpent errorMessage finishedAt }
}`;

export const BULK_JOB_UPDATED = /* GraphQL */ `
subscription BulkJobUpdated($id: ID!) {
  bulkJobUpdated(id: $id) { id kind status total done failed creditsSpent errorMessage finishedAt }
}`;


// ---- event types -------------------------------------------------------------------------------------------

export const EVENT_TYPES = /* GraphQL */ `
query EventTypes($first: Int!, $after: Cursor) {
  eventTypes(first: $first, after: $after, orderBy: {field: NAME, direction: ASC}) {
    totalCount
    pageInfo { hasNextPage endCursor }
    edges { node { id name description schema createdAt updatedAt } }
  }
}`;

// EVENT_TYPE_NAMES are the names the requests list offers to filter by.
export const EVENT_TYPE_NAMES = /* GraphQL */ `
query EventTypeNames {
  eventTypes(first: 500, orderBy: {field: NAME, direction: ASC}) {
    edges { node { id name } }
  }
}`;

export const CREATE_EVENT_TYPE = /* GraphQL */ `
mutation CreateEventType($input: CreateEventTypeInput!) {
  createEventType(input: $input) { id name }
}`;

export const UPDATE_EVENT_TYPE = /* GraphQL */ `
mutation UpdateEventType($id: ID!, $input: UpdateEventTypeInput!) {
  updateEventType(id: $id, input: $input) { id name }
}`;

export const DELETE_EVENT_TYPE = /* GraphQL */ `
mutation DeleteEventType($id: ID!) {
  deleteEventType(id: $id) { id name }
}`;

// ---- alerts ------------------------------------------------------------------------------------------------

export const ALERT_SETTINGS = /* GraphQL */ `
query AlertSettings {
  viewer { role tenant { id name creditBalance lowCreditThreshold } }
  alertSubscriptions {
    id
    url
    events
    format
    createdAt
    recipient { id name state stateReason }
  }
}`;

export const ALERTS = /* GraphQL */ `
query Alerts($first: Int!, $after: Cursor) {
  alerts(first: $first, after: $after) {
    totalCount
    pageInfo { hasNextPage endCursor }
    edges {
      node {
        id
        receivedAt
        status
        headers { name value }
        deliveries {
          id
          status
          attemptCount
          maxAttempts
          recipient { id name url }
        }
      }
    }
  }
}`;

export const CREATE_ALERT_SUBSCRIPTION = /* GraphQL */ `
mutation CreateAlertSubscription($input: CreateAlertSubscriptionInput!) {
  createAlertSubscription(input: $input) { id url events format }
}`;

export const DELETE_ALERT_SUBSCRIPTION = /* GraphQL */ `
mutation DeleteAlertSubscription($id: ID!) {
  deleteAlertSubscription(id: $id) { id }
}`;

export const SET_LOW_CREDIT_THRESHOLD = /* GraphQL */ `
mutation SetLowCreditThreshold($tenantId: ID!, $threshold: Int) {
  setLowCreditThreshold(tenantId: $tenantId, threshold: $threshold) { id creditBalance lowCreditThreshold }
}`;

// ---- outbound jobs -----------------------------------------------------------------------------------------

export const OUTBOUND_JOBS = /* GraphQL */ `
query OutboundJobs($first: Int!, $after: Cursor) {
  outboundJobs(first: $first, after: $after) {
    totalCount
    pageInfo { hasNextPage endCursor }
    edges {
      node {
        id
        createdAt
        url
        method
        status
        attemptCount
        maxAttempts
        nextAttemptAt
        finishedAt
        idempotencyKey
        duplicateOf { id }
      }
    }
  }
}`;

export const OUTBOUND_JOB = /* GraphQL */ `
query OutboundJob($id: ID!) {
  node(id: $id) {
    ... on OutboundJob {
      id
      createdAt
      url
      method
      status
      attemptCount
      maxAttempts
      nextAttemptAt
      firstAttemptAt
      finishedAt
      expiresAt
      idempotencyKey
      storeResponseBody
      duplicateOf { id }
      headers { name value }
      body
      bodySize
      attempts {
        number
        startedAt
        finishedAt
        status
        httpStatus
        durationMs
        errorKind
        errorMessage
        responseTruncated
        responseBody
      }
    }
  }
}`;

export const SEND_OUTBOUND = /* GraphQL */ `
mutation SendOutbound($input: SendOutboundInput!) {
  sendOutbound(input: $input) { id status duplicateOf { id } }
}`;

// ---- credits -----------------------------------------------------------------------------------------------

export const CREDITS = /* GraphQL */ `
query Credits {
  viewer {
    role
    tenant {
      id
      name
      creditBalance
      plan { id name monthlyCredits retentionDays maxServers maxRecipientsPerServer maxRequestsPerSecond }
      usageHistory(months: 6) { period requestsAccepted manualRetries replays creditsSpent creditsGranted }
      creditsPerDay(days: 7) { day credits requests retries replays outbound }
    }
  }
  plans { id name monthlyCredits retentionDays maxServers maxRecipientsPerServer maxRequestsPerSecond selectable }
}`;

export const LEDGER = /* GraphQL */ `
query Ledger($first: Int!, $after: Cursor, $tenantId: ID) {
  ledger(tenantId: $tenantId, first: $first, after: $after) {
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
        tenant { id name }
      }
    }
  }
}`;

